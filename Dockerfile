# One image for Airflow's components and the Spark master and workers: lakehouse installed with
# Airflow, the Spark provider and PySpark (whose spark-class and spark-submit run the cluster).
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps curl tini \
 && rm -rf /var/lib/apt/lists/*

ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    LAKEHOUSE_HOME=/opt/lakehouse

WORKDIR /opt/lakehouse
COPY pyproject.toml README.md ./
COPY lakehouse ./lakehouse
RUN pip install ".[airflow,catalog,deploy,s3]"
COPY dags ./dags
COPY plugins ./plugins
COPY deploy ./deploy

# Spark's daemons and Airflow's components run as this user; /data is the shared landing volume.
RUN useradd --create-home --uid 50000 lakehouse && mkdir -p /data && chown lakehouse /data
USER lakehouse
ENV PYSPARK_PYTHON=/usr/local/bin/python AIRFLOW_HOME=/opt/airflow-home
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["airflow", "version"]
