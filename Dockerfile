# listenlab for a Hugging Face Space (sdk: docker) or any container host.
#
#   docker build -t listenlab .            # CPU: the bundled Piper voice
#   docker build --build-arg LISTENLAB_BASE_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04 \
#                -t listenlab-gpu .         # GPU: embedded vLLM-Omni (the [gpu] extra)
#
# On a Space, the variable LISTENLAB_BASE_IMAGE (Settings -> Variables; Space variables reach the
# build as build arguments) picks the GPU image with no edit: on a base with CUDA
# (/usr/local/cuda) the [gpu] extra is installed, on any other base it is not.
# Configure with environment variables (docs/deploy.md, "Configuration"), e.g. in the Space settings:
#   LISTENLAB_BACKENDS="piper qwen=vllm-omni+http://gpu-host:8000?model=Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
# Data (SQLite DB, take audio, voice library) goes to /data when the Space has persistent
# storage, else to /home/user/data (lost on restart, and the server says so); under /data the DB
# uses journal DELETE. The image works with any builder (BuildKit, Docker's classic builder,
# buildah): nothing is written into a root-owned folder, and no build files are left behind.
# .ci/run builds it with buildah and runs it as UID 1000 (tests/test_image.py).

ARG LISTENLAB_BASE_IMAGE=python:3.11-slim

# --------------------------------------------------------------------------- the wheel
# Built as root in a throwaway stage, so the image keeps no source tree, build/ or egg-info.
FROM ${LISTENLAB_BASE_IMAGE} AS wheel
# hadolint ignore=DL3008
RUN if ! python3 -m pip --version >/dev/null 2>&1; then \
        apt-get update && apt-get install -y --no-install-recommends python3 python3-pip \
        && rm -rf /var/lib/apt/lists/*; fi
COPY pyproject.toml README.md /src/
COPY app /src/app
COPY backends /src/backends
COPY voices /src/voices
COPY evaluation /src/evaluation
COPY assets /src/assets
# hadolint ignore=DL3013
RUN python3 -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels /src

# --------------------------------------------------------------------------- the image
FROM ${LISTENLAB_BASE_IMAGE}
# ffmpeg: reference clips in mp3/ogg/webm; python3-venv: the GPU base has no Python of its own
# (the package list is split into words on purpose).
# hadolint ignore=DL3008,SC2046
RUN apt-get update && apt-get install -y --no-install-recommends ffmpeg \
        $(python3 -m venv --help >/dev/null 2>&1 || echo python3 python3-venv) \
    && rm -rf /var/lib/apt/lists/* \
    && (userdel -r ubuntu 2>/dev/null || true) \
    && useradd -m -u 1000 user
# Spaces run the container as UID 1000.
USER 1000
ENV HOME=/home/user VIRTUAL_ENV=/home/user/venv PATH=/home/user/venv/bin:$PATH \
    GRADIO_SERVER_NAME=0.0.0.0 GRADIO_SERVER_PORT=7860 GRADIO_ANALYTICS_ENABLED=False \
    HF_HUB_OFFLINE=1 LISTENLAB_DATA=/data:/home/user/data
WORKDIR /home/user
COPY --from=wheel --chown=1000 /wheels /home/user/wheels
# [oauth]: Hugging Face login (the arena's voters); [gpu]: vLLM-Omni in this process.
# hadolint ignore=DL3013
RUN python3 -m venv "$VIRTUAL_ENV" \
    && extras="oauth$([ -e /usr/local/cuda ] && echo ,gpu || true)" \
    && pip install --no-cache-dir "$(ls /home/user/wheels/*.whl)[$extras]" \
    && rm -rf /home/user/wheels
EXPOSE 7860
CMD ["listenlab", "serve"]
