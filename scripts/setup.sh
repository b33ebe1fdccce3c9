#!/usr/bin/env bash
# Create ./.venv with sparkrecover installed (editable) and the extras given as $1 (e.g. "test").
# Idempotent: a second call only re-checks. Needs Python >= 3.10 and Java 17 (for Spark).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"
command -v java >/dev/null || { echo "setup: java not found: Spark needs a JDK/JRE 17 on PATH" >&2; exit 1; }
if ! command -v javac >/dev/null && [ ! -x "${JAVA_HOME:-/nonexistent}/bin/javac" ]; then
  # Not fatal: without a JDK, sparkrecover journals Spark's events through its slower Py4J listener.
  echo "setup: note: no javac (JDK) found: sparkrecover will use its Py4J listener instead of the JVM one" >&2
fi
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || { echo "setup: $python is older than Python 3.10" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
spec="."
[ -n "$extras" ] && spec=".[$extras]"
stamp=".venv/.sparkrecover-installed-$(echo "$extras" | tr ',' '-')"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing sparkrecover${extras:+ with [$extras]} into .venv (pyspark is large: a few minutes the first time)" >&2
  .venv/bin/python -m pip install --quiet -e "$spec"
  touch "$stamp"
fi
# The s3a:// end-to-end test needs hadoop-aws, which pyspark does not bundle (see the script).
case ",$extras," in
  *,test,*)
    .venv/bin/python scripts/fetch_s3a_jars.py
    # The report's browser test renders the page in headless Chromium (Debian's package). Not
    # fatal when it cannot be installed: that test then skips (fails under CI) and says why.
    if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then
      as_root=""
      if [ "$(id -u)" != 0 ]; then
        as_root="sudo -n"
        $as_root true 2>/dev/null || as_root="no"
      fi
      if [ "$as_root" = no ]; then
        echo "setup: note: chromium is missing and this user cannot apt-get it: the report's browser test will skip" >&2
      else
        echo "setup: installing chromium (apt-get) for the report's browser test" >&2
        apt="$as_root env DEBIAN_FRONTEND=noninteractive apt-get"
        { $apt install -y --no-install-recommends chromium >/dev/null 2>&1 \
            || { $apt update >/dev/null && $apt install -y --no-install-recommends chromium >/dev/null; }; } \
          || echo "setup: note: chromium could not be installed: the report's browser test will skip" >&2
      fi
    fi
    ;;
esac
