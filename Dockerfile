FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    ANNOPLAN_HOST=0.0.0.0 ANNOPLAN_PORT=8000 \
    ANNOPLAN_DATABASE_URL=sqlite:////data/annoplan.db

WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY planner planner
COPY service service
COPY migrations migrations
RUN pip install --no-cache-dir . \
    && useradd --create-home --uid 10001 annoplan \
    && mkdir -p /data && chown annoplan /data

USER annoplan
EXPOSE 8000
CMD ["sh", "-c", "alembic upgrade head && python -m service"]
