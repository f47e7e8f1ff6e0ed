#!/usr/bin/env bash
# README command (b) and CI: set up, lint, then every test (ctest and pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

export FUSER_BUILD_TESTS=1
bash tools/setup.sh

# fuser is installed here: its autoload tests run (test_env_flags.py).
export FUSER_TESTS_INSTALLED=1
# Tests never read or pollute the user's kernel cache.
export FUSER_CACHE_DIR=${FUSER_CACHE_DIR:-$(mktemp -d /tmp/fuser-test-cache-XXXXXX)}

echo "== lint (set-up took ${SECONDS} s)"
"$PYTHON" -m ruff check fuser tests tools
"$PYTHON" -m ruff format --check fuser tests tools
"$PYTHON" -m mypy fuser

echo "== ctest (at ${SECONDS} s)"
"$PYTHON" tests/cpp/make_test_model.py build/cmake/test_data
ctest --test-dir build/cmake --output-on-failure

echo "== pytest (at ${SECONDS} s)"
# One worker per core (pytest-xdist) for all but the `timing` tests, which bound wall
# time and so run afterwards on their own. Idle workers take tests queued on busy ones
# (worksteal): the random-program tests take 25-35 s each, and one left last on a worker
# kept the other idle (2 cores: 738 s with xdist's default, 704 with worksteal).
workers=${FUSER_TEST_WORKERS:-$(nproc)}
status=0
"$PYTHON" -m pytest tests/python -q -p no:cacheprovider -n "$workers" --dist worksteal \
  -m "not timing" || status=$?
"$PYTHON" -m pytest tests/python -q -p no:cacheprovider -m timing || status=$?
echo "== done in ${SECONDS} s"
exit $status
