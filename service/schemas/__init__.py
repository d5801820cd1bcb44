"""Request and response bodies (pydantic), kept apart from the ORM models, a module per domain.

``base`` holds what every body shares (strict models, NUL-free text, label and criterion lists); the
resources have one each (``projects``, ``keys``, ``items``, ``raters``, ``labels``, ``plans``,
``batches``, ``health``), and so have the larger documents: ``documents`` (``/reliability``,
``/ranking``), ``report``, ``simulations`` (and ``/agreement``), ``plan_checks`` (a plan's simulated
check), ``certificates``, ``versions``, ``pairwise``, ``selective``, ``webhooks``. Import a name from
the module that holds it. Label Studio's objects stay with their adapter in ``service.label_studio``.
"""
