# listenlab for a Hugging Face Space (sdk: docker) or any container host.
#
#   docker build -t listenlab .                    # CPU: the bundled Piper voice (default stage)
#   docker build --target gpu -t listenlab-gpu .   # GPU: embedded vLLM-Omni (nvidia/cuda + [gpu])
#
# Configure with environment variables (docs/deploy.md, "Configuration"), e.g. in the Space settings:
#   LISTENLAB_BACKENDS="piper qwen=vllm-omni+http://gpu-host:8000?model=Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
# Data (SQLite DB, take audio, voice library) goes to /data when the Space has persistent
# storage, else to /home/user/data (lost on restart); under /data the DB uses journal DELETE.
# tests/test_deploy.py performs these install and start steps in a fresh venv on every CI run.

# --------------------------------------------------------------------------- GPU variant
FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04 AS gpu

# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends \
        python3 python3-venv ffmpeg libsndfile1 \
    && rm -rf /var/lib/apt/lists/* \
    && (userdel -r ubuntu 2>/dev/null || true) \
    && useradd -m -u 1000 user
USER 1000
ENV HOME=/home/user VIRTUAL_ENV=/home/user/venv PATH=/home/user/venv/bin:$PATH \
    GRADIO_SERVER_NAME=0.0.0.0 GRADIO_SERVER_PORT=7860 GRADIO_ANALYTICS_ENABLED=False \
    HF_HUB_OFFLINE=1 LISTENLAB_DATA=/data:/home/user/data \
    LISTENLAB_BACKENDS="vllm-omni?model=/data/models/Qwen3-TTS-12Hz-1.7B-CustomVoice"
WORKDIR /home/user/app
COPY --chown=1000 pyproject.toml README.md ./
COPY --chown=1000 app ./app
COPY --chown=1000 backends ./backends
COPY --chown=1000 voices ./voices
COPY --chown=1000 evaluation ./evaluation
COPY --chown=1000 assets ./assets
# hadolint ignore=DL3013
RUN python3 -m venv "$VIRTUAL_ENV" && pip install --no-cache-dir ".[gpu]"
WORKDIR /home/user
EXPOSE 7860
CMD ["listenlab", "serve"]

# --------------------------------------------------------------------------- CPU (default)
FROM python:3.11-slim AS cpu

# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends ffmpeg libsndfile1 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd -m -u 1000 user
# Spaces run the container as UID 1000.
USER 1000
ENV HOME=/home/user PATH=/home/user/.local/bin:$PATH \
    GRADIO_SERVER_NAME=0.0.0.0 GRADIO_SERVER_PORT=7860 GRADIO_ANALYTICS_ENABLED=False \
    HF_HUB_OFFLINE=1 LISTENLAB_DATA=/data:/home/user/data \
    LISTENLAB_BACKENDS=piper
WORKDIR /home/user/app
COPY --chown=1000 pyproject.toml README.md ./
COPY --chown=1000 app ./app
COPY --chown=1000 backends ./backends
COPY --chown=1000 voices ./voices
COPY --chown=1000 evaluation ./evaluation
COPY --chown=1000 assets ./assets
RUN pip install --no-cache-dir --user .
# Run from elsewhere: the installed package, not the source tree, must have everything.
WORKDIR /home/user
EXPOSE 7860
CMD ["listenlab", "serve"]
