# The training image of skillbank: cosmos-rl 0.4.7 with its real dependencies, flash-attn and
# redis-server, and skillbank itself at /opt/skillbank. Every Python pin comes from
# requirements-gpu.txt, installed by the same command a bare GPU node runs (scripts/setup.sh --gpu).
#
# Build it from the checkout (the tag is skill_info.yaml's container_image, which
# `skillbank submit --platform docker` runs; tests/test_platform_container.py keeps the two equal):
#   docker build -t skillbank/cosmos-rl:0.4.7-torch2.10-cu128 .
# For Slurm with pyxis/enroot, turn it into a squashfs file every node can read:
#   enroot import -o skillbank-cosmos-rl.sqsh dockerd://skillbank/cosmos-rl:0.4.7-torch2.10-cu128
#
# Base: the CUDA 12.8.1 release cosmos-rl's own image builds on (nvcr.io/nvidia/cuda, a pinned tag;
# its devel flavour, because flash-attn compiles with nvcc when no prebuilt wheel matches), on
# Ubuntu 24.04 for its Python 3.12.
ARG BASE_IMAGE=nvcr.io/nvidia/cuda:12.8.1-devel-ubuntu24.04
FROM ${BASE_IMAGE}

ARG TORCH_CUDA_ARCH_LIST="8.0;9.0;10.0"
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST}

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev git ca-certificates redis-server \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/skillbank
COPY . /opt/skillbank
# No GPU during a build: the setup checks the CUDA build of torch, cosmos-rl's config, flash-attn and
# redis-server, but not that a GPU is visible (the job's first step, `skillbank preflight --only env`, does).
RUN bash scripts/setup.sh --gpu --no-cuda-check

ENV PATH=/opt/skillbank/.venv/bin:${PATH} \
    SKILLBANK_ROOT=/opt/skillbank \
    HF_HOME=/root/.cache/huggingface
LABEL org.opencontainers.image.title="skillbank cosmos-rl training image" \
      org.opencontainers.image.description="cosmos-rl 0.4.7, torch 2.10.0 (CUDA 12.8), flash-attn, redis-server, skillbank"
CMD ["skillbank", "--help"]
