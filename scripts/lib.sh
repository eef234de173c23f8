# Shared helpers for the shell entry points (sourced, not run).
# Every entry point: fails fast, never prompts, logs to stderr, keeps stdout for data.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
USER_DIR="$ROOT/fairseq_plugins"

step() { printf '\n==> %s\n' "$*" >&2; }
die() { printf '%s: error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# Use the project's virtual environment when there is one; otherwise whatever is on PATH.
use_venv() {
    if [[ -x "$ROOT/.venv/bin/python" ]]; then
        export PATH="$ROOT/.venv/bin:$PATH"
    fi
    command -v fairseq-train >/dev/null || die "fairseq not found: run 'bash scripts/setup.sh' first"
}

# load_config FILE: a config is a bash file that sets PREP_ARGS, TRAIN_ARGS, GEN_ARGS (arrays).
load_config() {
    local file="$1"
    [[ -f "$file" ]] || file="$ROOT/configs/$1"
    [[ -f "$file" ]] || file="$ROOT/configs/$1.conf"
    [[ -f "$file" ]] || die "config not found: $1 (looked in the current directory and $ROOT/configs/)"
    PREP_ARGS=() TRAIN_ARGS=() GEN_ARGS=()
    # shellcheck disable=SC1090
    source "$file"
    CONFIG_FILE="$file"
}
