# A Citus node with pgvector, for docker-compose.citus.yml: the citusdata/citus
# image (Citus 13.2 on PostgreSQL 17) with pgvector from the PostgreSQL apt
# repository its base image already uses. Every node needs pgvector: the
# coordinator creates the extension on the workers when the schema is
# migrated.
FROM citusdata/citus:13.2.0
RUN apt-get update \
    && apt-get install -y --no-install-recommends "postgresql-$PG_MAJOR-pgvector" \
    && rm -rf /var/lib/apt/lists/*
