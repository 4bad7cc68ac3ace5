#!/usr/bin/env bash
# `meson install` into a temporary DESTDIR, then the installed troupe, run
# from a directory of its own with nothing but a model: make-model, serve (no
# config file), a completion over HTTP, SIGTERM.
set -u
meson=$1  # the meson that built this tree
build=$2  # its build directory
plugin=$3 # a shared library without troupe's CUDA entry points
unset LD_LIBRARY_PATH TROUPE_CUDA_LIB # (meson test points the first at the build tree)
tmp=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill -9 "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
check() { # description, then a command that must succeed
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
exit_code() { "$@" >"$tmp/out" 2>"$tmp/err"; echo $?; }
option() { # a meson option's value in $build
  "$meson" introspect "$build" --buildoptions |
    python3 -c "import json, sys; print({o['name']: o['value'] for o in json.load(sys.stdin)}['$1'])"
}

check "meson install --destdir" test "$(exit_code "$meson" install -C "$build" --no-rebuild --destdir "$tmp/stage")" = 0
root=$tmp/stage$(option prefix)
troupe=$root/$(option bindir)/troupe
check "troupe is in bin/" test -x "$troupe"
check "the example configs are in share/troupe/" \
  test -s "$root/$(option datadir)/troupe/default.toml" -a -s "$root/$(option datadir)/troupe/tenants.example.toml"

# Far from the source and build trees: no config/, no models/.
mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere" || exit 1
check "installed troupe --help: exit 0" test "$(exit_code "$troupe" --help)" = 0
check "no model here: exit 1" test "$(exit_code "$troupe" serve --port 0)" = 1
check "no model here: one line naming models/tiny and make-model" \
  test "$(wc -l <"$tmp/err")" = 1 -a -n "$(grep "'models/tiny'.*troupe make-model --preset tiny --out models/tiny" "$tmp/err")"
check "make-model tiny" test "$(exit_code "$troupe" make-model --preset tiny --out tiny)" = 0

"$troupe" serve tiny --port 0 >"$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 600); do
  grep -q "troupe: ready" "$tmp/serve.log" && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
check "serve DIR, no config file: ready" grep -q "troupe: ready: model tiny" "$tmp/serve.log"
port=$(sed -n 's|^troupe: listening on http://[^:]*:\([0-9]*\)$|\1|p' "$tmp/serve.log")
curl -s --max-time 60 "http://127.0.0.1:${port:-1}/v1/completions" -H "content-type: application/json" \
  -d '{"model": "tiny", "prompt": "This License", "max_tokens": 4}' >"$tmp/answer.json"
check "it answers a completion" grep -q '"finish_reason"' "$tmp/answer.json"
kill -TERM "$server"
wait "$server"
rc=$?
server=
check "SIGTERM stops it: exit 0" test "$rc" = 0
check "SIGTERM stops it: said so" grep -q "^troupe: stopped" "$tmp/serve.log"

# Where the CUDA toolkit is, the backend is installed in lib/<arch>/troupe,
# and troupe-gpu-bench (linked with it) finds it there.
if [ -e "$root/$(option bindir)/troupe-gpu-bench" ]; then
  check "libtroupe_cuda.so is in lib/.../troupe/" test -f "$root/$(option libdir)/troupe/libtroupe_cuda.so"
  check "troupe-gpu-bench finds the installed libtroupe_cuda.so" \
    grep -q "libtroupe_cuda.so => $tmp/stage/.*/troupe/libtroupe_cuda.so" <(ldd "$root/$(option bindir)/troupe-gpu-bench")
fi
# troupe looks for it there too (dlopen): in a copy of the installed layout, a
# library there without troupe's entry points is the one found, and refused.
layout=$tmp/layout
mkdir -p "$layout/$(option bindir)" "$layout/$(option libdir)/troupe"
cp "$troupe" "$layout/$(option bindir)/"
cp "$plugin" "$layout/$(option libdir)/troupe/libtroupe_cuda.so"
check "cuda:0: lib/.../troupe/libtroupe_cuda.so is the one loaded" \
  test "$(exit_code "$layout/$(option bindir)/troupe" serve tiny --port 0 --set 'engine.devices=["cuda:0"]')" = 1
check "cuda:0: ... and refused, in one line" grep -qx "troupe serve: libtroupe_cuda.so lacks troupe's entry points" "$tmp/err"

echo "$fails failed"
[ "$fails" -eq 0 ]
