#!/bin/sh
# Builds build/{{name}}.wasm: installs requirements.txt into .venv (once;
# again when it changes), runs the unit tests in tests/, then has
# componentize-py build src/app.py against the WIT package the SDK carries.
set -eu
cd "$(dirname "$0")"
python=${PYTHON:-python3}
if [ ! -x .venv/bin/componentize-py ] || [ requirements.txt -nt .venv/installed ]; then
  "$python" -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
  touch .venv/installed
fi
PYTHONPATH=src .venv/bin/python -m unittest discover --quiet --start-directory tests
wit=$(.venv/bin/python -c 'import capwasm_provider; print(capwasm_provider.WIT)')
# componentize-py takes the modules the app imports from the directories it
# is given: the sources and the virtualenv's packages (the SDK).
packages=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p build
.venv/bin/componentize-py -d "$wit" -w {{world}}-provider componentize app -p src -p "$packages" \
  -o build/{{name}}.wasm.tmp
mv build/{{name}}.wasm.tmp build/{{name}}.wasm
echo "build/{{name}}.wasm"
