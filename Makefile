# One-command set-up: `make book` or `make test` creates .venv with the pinned
# dependencies (requirements.txt) and installs kvmath into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test unit nbval book pdf browser chromium bench refresh-notebooks clean

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# Every test: unit and property tests, strict nbval over the chapter notebooks,
# then the book build and the headless-browser check of every page.
test: venv chromium
	$(PY) -m pytest -q tests --ignore=tests/browser
	$(PY) -m pytest -q --nbval book -p no:cacheprovider
	$(MAKE) book
	$(MAKE) pdf
	$(PY) -m pytest -q tests/browser

# The PDF and the browser check drive Debian's Chromium headless (a browser a tool downloads
# itself does not run here): installed with apt when missing and this is root, else one line
# says what to install.
chromium:
	@command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    echo "installing Debian's chromium (apt-get)" && apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  { echo "make test needs Debian's chromium: run 'apt-get install chromium' as root"; exit 2; }

unit: venv
	$(PY) -m pytest -q tests --ignore=tests/browser

# Every build executes every chapter: scripts/execute_book.py runs them in parallel into the
# execution cache, which the build then reads (execute_notebooks: cache).
book: venv
	$(PY) scripts/execute_book.py
	$(VENV)/bin/jupyter-book build . --all -W -n --keep-going
	@echo "Book built: open $(CURDIR)/_build/html/index.html"

# One PDF of the built book (system Chromium, offline), stamped with version and commit.
pdf: venv
	$(PY) scripts/build_pdf.py --out _build/kvmath.pdf

bench: venv
	$(PY) benchmarks/evaluate_grid.py

# Re-run the chapter notebooks in place so their stored outputs match the
# library; review `git diff book/` before committing.
refresh-notebooks: venv
	$(PY) scripts/refresh_notebooks.py

clean:
	rm -rf _build $(VENV)
