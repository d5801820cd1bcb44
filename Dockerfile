# annoplan's image: the wheel and its dependencies' wheels are built in the first stage; the second
# installs them (not the source tree; RUN --mount needs BuildKit, the default since Docker 23) and runs
# as an unprivileged user. SQLite lives in the volume /data unless ANNOPLAN_DATABASE_URL points
# elsewhere (compose.yaml: PostgreSQL). docs/operations.md.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY planner planner
COPY service service
COPY migrations migrations
# service/dashboard/glossary.md links to this file: the wheel ships the glossary the app serves at /glossary
COPY docs/glossary.md docs/glossary.md
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    ANNOPLAN_HOST=0.0.0.0 ANNOPLAN_PORT=8000 \
    ANNOPLAN_DATABASE_URL=sqlite:////data/annoplan.db
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels annoplan \
    && useradd --create-home --uid 10001 annoplan \
    && mkdir -p /data /snapshots && chown annoplan /data /snapshots
USER annoplan
WORKDIR /home/annoplan
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('ANNOPLAN_PORT', '8000'), timeout=4)"]
# migrates the database, then serves ANNOPLAN_WORKERS processes (default 1)
CMD ["annoplan", "serve"]
