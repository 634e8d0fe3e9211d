# Two commands: `make run` (set up, index the default dataset, start the workbench) and
# `make test` (set up, run the whole suite, browser test included).
VENV    ?= .venv
PY      := $(VENV)/bin/python
DATASET ?= datasets/devmem
PORT    ?= 8501
export LANCEDB_LOG ?= error
export HF_HUB_OFFLINE ?= 1

.PHONY: run test setup chromium bench bench-quick clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

run: setup
	$(VENV)/bin/rwb index $(DATASET)
	RWB_DATASET=$(DATASET) $(VENV)/bin/streamlit run app.py --server.address 127.0.0.1 --server.port $(PORT)

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian chromium for the browser test"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium chromium-driver fonts-wqy-zenhei >/dev/null; }

test: setup chromium
	@# bytecode of our own modules once: with PYTHONDONTWRITEBYTECODE set, every rwb, Streamlit
	@# and Ray process the tests start would otherwise compile them again
	$(PY) -m compileall -q retrieval eval pages bench app.py > /dev/null
	$(PY) -m pytest -n 2 --dist loadfile   # pytest-xdist: the test files shared by 2 workers

bench: setup
	$(PY) -m bench.run --full

bench-quick: setup
	$(PY) -m bench.run --quick

clean:
	rm -rf .rwb .pytest_cache
	find retrieval eval -name '*.nbi' -delete -o -name '*.nbc' -delete  # numba's compiled kernels
