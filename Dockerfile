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
#
# Machine scores (`listenlab metrics`, docs/metrics.md): on a CPU base the [metrics] extra is
# installed with the CPU build of torch 2.13.0 (from LISTENLAB_TORCH_INDEX, PyTorch's CPU index;
# or from a folder of wheels mounted at build time, LISTENLAB_TORCH_WHEELS). It adds 1.4 GB.
# LISTENLAB_METRICS: auto (default: installed when that torch can be had, else the build log
# says so and the image has no metrics), 1 (required: the build fails without it) or 0 (never).
# On a CUDA base the extra is not installed (vLLM-Omni brings its own torch).

ARG LISTENLAB_BASE_IMAGE=python:3.11-slim
ARG LISTENLAB_METRICS=auto

# --------------------------------------------------------------------------- the wheel
# Built as root in a throwaway stage, so the image keeps no source tree, build/ or egg-info.
FROM ${LISTENLAB_BASE_IMAGE} AS wheel
ARG LISTENLAB_METRICS
# g++ (and Python's headers where the base lacks them): two [metrics] packages (webrtcvad,
# pyworld) are source-only on PyPI; their wheels are built here, not in the image.
# hadolint ignore=DL3008,SC2046
RUN if ! python3 -m pip --version >/dev/null 2>&1; then \
        apt-get update && apt-get install -y --no-install-recommends python3 python3-pip \
        && rm -rf /var/lib/apt/lists/*; fi \
    && if [ "$LISTENLAB_METRICS" != 0 ] && [ ! -e /usr/local/cuda ]; then \
        apt-get update && apt-get install -y --no-install-recommends g++ libc6-dev \
          $(python3 -c 'import os, sysconfig; print("" if os.path.exists(sysconfig.get_paths()["include"] + "/Python.h") else "python3-dev")') \
        && rm -rf /var/lib/apt/lists/*; fi
COPY pyproject.toml README.md /src/
COPY app /src/app
COPY backends /src/backends
COPY voices /src/voices
COPY evaluation /src/evaluation
COPY assets /src/assets
# hadolint ignore=DL3013
RUN python3 -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels /src
# hadolint ignore=DL3013
RUN mkdir -p /wheels/extra \
    && if [ "$LISTENLAB_METRICS" != 0 ] && [ ! -e /usr/local/cuda ]; then \
        if ! python3 -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels/extra \
               webrtcvad==2.0.10 "pyworld>=0.3.4,<0.4"; then \
          echo "metrics: could not build webrtcvad/pyworld"; [ "$LISTENLAB_METRICS" = auto ]; \
        fi; fi

# --------------------------------------------------------------------------- the image
FROM ${LISTENLAB_BASE_IMAGE}
ARG LISTENLAB_METRICS
ARG LISTENLAB_TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG LISTENLAB_TORCH_WHEELS=""
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
# [oauth]: Hugging Face login (the arena's voters); [gpu]: vLLM-Omni in this process;
# [metrics]: the bundled machine scores, after the CPU torch (see the top of this file).
# hadolint ignore=DL3013
RUN python3 -m venv "$VIRTUAL_ENV" \
    && extras="oauth$([ -e /usr/local/cuda ] && echo ,gpu || true)" \
    && if [ "$LISTENLAB_METRICS" != 0 ] && [ ! -e /usr/local/cuda ] \
          && [ -n "$(ls /home/user/wheels/extra)" ]; then \
        if pip install --no-cache-dir --retries 1 --timeout 30 "torch==2.13.0+cpu" \
             --extra-index-url "$LISTENLAB_TORCH_INDEX" \
             ${LISTENLAB_TORCH_WHEELS:+--find-links "$LISTENLAB_TORCH_WHEELS"}; then \
          extras="$extras,metrics"; \
        else \
          echo "metrics: no CPU torch 2.13.0 from $LISTENLAB_TORCH_INDEX: the image has no [metrics]"; \
          [ "$LISTENLAB_METRICS" = auto ] || exit 1; \
        fi; fi \
    && pip install --no-cache-dir --find-links /home/user/wheels/extra \
         "$(ls /home/user/wheels/*.whl)[$extras]" \
    && rm -rf /home/user/wheels
EXPOSE 7860
CMD ["listenlab", "serve"]
