# Hugging Face Space (sdk: docker) or any container host. CPU voice by default; point it at a
# vLLM-Omni server with LISTENLAB_BACKENDS="piper vllm-omni+http://host:8000?model=…".
FROM python:3.11-slim

RUN apt-get update && apt-get install -y --no-install-recommends ffmpeg libsndfile1 \
    && rm -rf /var/lib/apt/lists/*

# Spaces run the container as UID 1000.
RUN useradd -m -u 1000 user
USER user
ENV HOME=/home/user PATH=/home/user/.local/bin:$PATH \
    GRADIO_SERVER_NAME=0.0.0.0 GRADIO_SERVER_PORT=7860 GRADIO_ANALYTICS_ENABLED=False \
    HF_HUB_OFFLINE=1 LISTENLAB_DATA=/home/user/data
WORKDIR $HOME/app

COPY --chown=user pyproject.toml README.md ./
COPY --chown=user app ./app
COPY --chown=user backends ./backends
COPY --chown=user voices ./voices
COPY --chown=user evaluation ./evaluation
COPY --chown=user assets ./assets
RUN pip install --no-cache-dir --user .

EXPOSE 7860
# With persistent storage, use --db /data/listenlab.db (the server then uses journal_mode=DELETE:
# WAL corrupts on network filesystems).
CMD ["listenlab", "serve"]
