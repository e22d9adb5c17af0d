#!/usr/bin/env bash
# End to end: starts glimpse-server on an ephemeral port and runs every glimpse subcommand,
# checking exit codes and the files written; then stops the server with SIGTERM (exit 0).
#   cli_test.sh SERVER_BINARY CLIENT_BINARY SAMPLE_PNG
# Skips (exit 0 with a note) when no EGL context can be opened, unless GLIMPSE_REQUIRE_GPU_CONTEXT=1.
set -uo pipefail
# shellcheck source=cli_server.sh
source "$(dirname "$0")/cli_server.sh"

# No start-up warm-up (tests/service/warm_up_test.cc covers it): one call per analysis here.
start_server_or_skip --listen=127.0.0.1:0 --metrics-listen=127.0.0.1:0 --shutdown-grace-s=10 \
  --warm-up=0
cd "$work"

# health, info
[ "$(g health)" = SERVING ] || fail "health did not print SERVING"
g health --service=glimpse.v1.ImageAnalytics >/dev/null || fail "health of the service"
g info >info.txt || fail "info"
grep -q "renderer\|device" info.txt || fail "info printed no device"
# llvmpipe has ballots (Mesa 22's GL has no GL_KHR_shader_subgroup); a GPU's line says its own.
grep -q "^subgroups  ballots \(yes\|no\); GL_KHR_shader_subgroup " info.txt ||
  fail "info printed no subgroup line: $(cat info.txt)"
grep -q "^staging    [0-9.]* / 128.0 MiB held by images read ([0-9.]* mapped); [0-9]* images found it full" info.txt ||
  fail "info printed no staging line: $(cat info.txt)"

# upload, list
id=$(g upload "$sample" --label=sample) || fail "upload"
[[ "$id" =~ ^[0-9a-f]{32}$ ]] || fail "upload printed \"$id\", not an id"
g list >list.txt || fail "list"
grep -q "$id" list.txt || fail "list does not show $id"
grep -q "640x480" list.txt || fail "list does not show the size"
# The sample with an EXIF tag of 6 (a quarter turn clockwise, in a PNG eXIf chunk after IHDR):
# turned by default, as stored with --orientation=stored; a bad value is a usage error.
python3 - "$sample" turned.png <<'PY' || fail "could not write turned.png"
import struct, sys, zlib
png = open(sys.argv[1], "rb").read()
tiff = b"II*\0" + struct.pack("<IHHHIHHI", 8, 1, 0x0112, 3, 1, 6, 0, 0)
chunk = struct.pack(">I", len(tiff)) + b"eXIf" + tiff + struct.pack(">I", zlib.crc32(b"eXIf" + tiff))
open(sys.argv[2], "wb").write(png[:33] + chunk + png[33:])
PY
g upload turned.png 2>&1 >/dev/null | grep -q "stored 480x640 3-channel" ||
  fail "turned.png was not stored turned"
g upload turned.png --orientation=stored 2>&1 >/dev/null | grep -q "stored 640x480 3-channel" ||
  fail "turned.png --orientation=stored was not stored as stored"
g upload turned.png --orientation=sideways >/dev/null 2>&1
[ $? = 2 ] || fail "--orientation=sideways did not exit 2"
# Every command that takes a file decodes it as --channels and --orientation say: inline (under
# 3 MiB), uploaded for the call (big.png, 3.3 MB: the same tag, stored deflate blocks), streamed
# by analyze, in analyze --each. npy_shape FILE: the shape in a .npy header.
npy_shape() { head -c 128 "$1" | grep -a -o "'shape': ([0-9, ]*)"; }
python3 - "$sample" big.png <<'PY' || fail "could not write big.png"
import struct, sys, zlib
def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
w, h = 1100, 1000
rows = b"".join(b"\0" + bytes((x * 7 + y * 3 + c) % 256 for x in range(w) for c in range(3)) for y in range(h))
tiff = b"II*\0" + struct.pack("<IHHHIHHI", 8, 1, 0x0112, 3, 1, 6, 0, 0)
open(sys.argv[2], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                              chunk(b"eXIf", tiff) + chunk(b"IDAT", zlib.compress(rows, 0)) + chunk(b"IEND", b""))
PY
[ "$(stat -c %s big.png)" -gt $((3 << 20)) ] || fail "big.png is not over 3 MiB"
gid=$(g upload turned.png --orientation=stored --channels=1) || fail "upload --channels=1"
g box "$gid" --rx=0 --out=t_id.npy >/dev/null || fail "box of the grey upload"
g box turned.png --rx=0 --out=t_file.npy >/dev/null || fail "box of turned.png"
[ "$(npy_shape t_file.npy)" = "'shape': (640, 480, 3)" ] || fail "turned.png inline: $(npy_shape t_file.npy)"
g box turned.png --rx=0 --channels=1 --orientation=stored --out=t_inline.npy >/dev/null ||
  fail "box --channels=1 --orientation=stored"
cmp t_inline.npy t_id.npy || fail "the inline file with --channels=1 --orientation=stored differs from its upload"
g integral turned.png --channels=4 --npy=t_integral.npy >/dev/null || fail "integral --channels=4"
[ "$(npy_shape t_integral.npy)" = "'shape': (640, 480, 4)" ] || fail "integral --channels=4: $(npy_shape t_integral.npy)"
g analyze turned.png --channels=1 --orientation=stored --box_filter=rx=0,out=t_analyze.npy >/dev/null ||
  fail "analyze --channels=1 --orientation=stored"
cmp t_analyze.npy t_id.npy || fail "analyze's streamed file with --channels=1 --orientation=stored differs"
g analyze --each turned.png "$gid" --channels=1 --orientation=stored --box_filter=rx=0 >t_each.csv ||
  fail "analyze --each --channels=1"
grep -q "^0,turned.png,box_filter,OK,640x480x1 " t_each.csv || fail "analyze --each --channels=1: $(cat t_each.csv)"
grep -q "^1,$gid,box_filter,OK,640x480x1 " t_each.csv || fail "analyze --each with an id: $(cat t_each.csv)"
g box big.png --rx=0 --channels=2 --orientation=stored --out=big.npy >/dev/null || fail "box of big.png"
[ "$(npy_shape big.npy)" = "'shape': (1000, 1100, 2)" ] || fail "big.png uploaded for the call: $(npy_shape big.npy)"
g box big.png --rx=0 --out=big_turned.npy >/dev/null || fail "box of big.png, turned"
[ "$(npy_shape big_turned.npy)" = "'shape': (1100, 1000, 3)" ] || fail "big.png turned: $(npy_shape big_turned.npy)"
g box "$gid" --rx=0 --channels=1 >/dev/null 2>err.txt
[ $? = 2 ] || fail "--channels with a stored image's id should exit 2"
grep -q "channels applies to encoded files, not the stored image $gid" err.txt || fail "$(cat err.txt)"
g histogram turned.png --channels=5 >/dev/null 2>err.txt
[ $? = 2 ] || fail "--channels=5 should exit 2"
grep -q "channels must be an integer in \[0, 4\], got \"5\"" err.txt || fail "$(cat err.txt)"
g analyze turned.png --histogram=channels=1 >/dev/null 2>err.txt
[ $? = 2 ] || fail "--histogram=channels=1 should exit 2"
grep -q "give --channels to analyze itself" err.txt || fail "$(cat err.txt)"
g upload "$sample" --raw=640x480x3 --channels=1 >/dev/null 2>err.txt
[ $? = 2 ] || fail "upload --raw --channels should exit 2"
g delete "$gid" >/dev/null || fail "delete the grey upload"

# histogram: CSV, JSON, PNG chart; by id and by file (inline)
g histogram "$id" --csv=h.csv --json=h.json --png=h.png >/dev/null || fail "histogram"
[ "$(wc -l <h.csv)" = 257 ] || fail "h.csv should have a header and 256 rows"
head -1 h.csv | grep -q "^bin,lo,hi,count0,count1,count2$" || fail "h.csv header: $(head -1 h.csv)"
# Every channel counts all 640 * 480 pixels.
awk -F, 'NR > 1 { s += $4 } END { exit s != 307200 }' h.csv || fail "h.csv counts do not sum to 307200"
grep -q '"bins": 256' h.json || fail "h.json"
head -c 8 h.png | od -c | grep -q "P   N   G" || fail "h.png is not a PNG"
g histogram "$id" --png=h_log.png --log >/dev/null || fail "histogram --log"
head -c 8 h_log.png | od -c | grep -q "P   N   G" || fail "h_log.png is not a PNG"
cmp -s h.png h_log.png && fail "--log drew the same chart as the linear scale"
g histogram "$sample" --source=luma --bins=16 --csv=luma.csv >/dev/null || fail "histogram of a file"
[ "$(wc -l <luma.csv)" = 17 ] || fail "luma.csv rows"
# A file over the inline limit (3 MiB) is uploaded for the call and deleted after it.
{ printf 'P6\n1100 1000\n255\n'; head -c 3300000 /dev/urandom; } >big.ppm
g histogram big.ppm --bins=8 --csv=big.csv >/dev/null || fail "histogram of a file over 3 MiB"
[ "$(wc -l <big.csv)" = 9 ] || fail "big.csv rows"
g list >list.txt || fail "list after the large file"
grep -q "big.ppm" list.txt && fail "the temporary upload of big.ppm is still stored: $(cat list.txt)"

# integral: .npy of H x W x C uint64 (header + 640*480*3*8 bytes)
g integral "$id" --npy=integral.npy --squared >/dev/null || fail "integral"
size=$(stat -c %s integral.npy)
[ $((size - 128)) = $((640 * 480 * 3 * 8)) ] || fail "integral.npy has $size bytes"
head -c 128 integral.npy | grep -q "'descr': '<u8'" || fail "integral.npy header"
grep -q "'shape': (480, 640, 3)" <(head -c 128 integral.npy) || fail "integral.npy shape"
[ -s integral_squared.npy ] || fail "no squared table"

# compact: CSV of passing pixels; count only
g compact "$id" --lo=200 --hi=255 --channel=0 --csv=c.csv >compact.txt || fail "compact"
head -1 c.csv | grep -q "^x,y,v0,v1,v2$" || fail "c.csv header"
total=$(sed -n 's/.*: \([0-9]*\) pixels pass.*/\1/p' compact.txt)
[ "$(($(wc -l <c.csv) - 1))" = "$total" ] || fail "c.csv rows != total $total"
g compact "$id" --lo=0 --hi=255 --count-only | grep -q "307200 pixels pass" || fail "count-only"

# box: PNG out; keep -> chain into histogram by the new id
g box "$id" --rx=3 --out=box.png >/dev/null || fail "box"
head -c 8 box.png | od -c | grep -q "P   N   G" || fail "box.png is not a PNG"
g box "$id" --rx=2 --ry=1 --out=box.npy >/dev/null || fail "box .npy"
[ $(($(stat -c %s box.npy) - 128)) = $((640 * 480 * 3)) ] || fail "box.npy size"
kept=$(g box "$id" --keep --label=blurred | tail -1)
[[ "$kept" =~ ^[0-9a-f]{32}$ ]] || fail "box --keep printed \"$kept\""
g histogram "$kept" --csv=kept.csv >/dev/null || fail "histogram of the kept box result"

# analyze: every analysis in one call, each writing what its own command writes; same results
g analyze "$sample" --histogram=bins=16,source=luma,csv=a_luma.csv --integral=npy=a_integral.npy \
  --compaction=lo=200,hi=255,channel=0,csv=a_c.csv --box_filter=rx=3,out=a_box.npy >analyze.txt \
  || fail "analyze"
cmp a_luma.csv luma.csv || fail "analyze's histogram differs from the histogram command's"
cmp a_integral.npy integral.npy || fail "analyze's integral table differs"
cmp a_c.csv c.csv || fail "analyze's compaction differs"
g box "$id" --rx=3 --out=box3.npy >/dev/null || fail "box .npy rx=3"
cmp a_box.npy box3.npy || fail "analyze's box filter differs"
grep -q "4 analyses in one call" analyze.txt || fail "analyze summary: $(cat analyze.txt)"
g list | grep -q "analyze" && fail "analyze kept its image without --keep"
akept=$(g analyze "$sample" --histogram --keep --label=kept-by-analyze | tail -1)
[[ "$akept" =~ ^[0-9a-f]{32}$ ]] || fail "analyze --keep printed \"$akept\""
g analyze "$akept" --histogram=csv=a_kept.csv >/dev/null || fail "analyze by id"
g analyze "$sample" --histogram=binz=3 >/dev/null 2>&1
[ $? = 2 ] || fail "analyze with an unknown sub-option should exit 2"
g analyze "$sample" >/dev/null 2>&1
[ $? = 2 ] || fail "analyze without analyses should exit 2"
g delete "$akept" >/dev/null || fail "delete analyze's kept image"

# load mode, briefly
g load --rpcs=histogram --sizes=1 --concurrency=2 --duration-s=1 --markdown=load.md >/dev/null \
  || fail "load"
grep -q "| histogram | 1 MP" load.md || fail "load.md has no histogram row"
# two tenants at once (access control is off here: their names go as glimpse-client-key), a row
# each, every call answered
g load --rpcs=histogram --sizes=1 --concurrency=1 --duration-s=1 --tenants=a=,b= \
  --markdown=load2.md >/dev/null || fail "load with two tenants"
for t in a b; do
  grep -qE "^\| histogram \(tenant $t\) \| 1 MP \([^|]*\| 1 \| [1-9][0-9]* \| 0 \|" load2.md ||
    fail "load2.md has no error-free row for tenant $t: $(cat load2.md)"
done
g load --rpcs=histogram --sizes=1 --duration-s=1 --tenants=nameonly >/dev/null 2>err.txt
[ $? = 2 ] || fail "load with a --tenants pair without '=' should exit 2"
grep -q "NAME=TOKEN" err.txt || fail "bad --tenants: $(cat err.txt)"
# --batch: each request one AnalyzeBatch call of 4 images; one row, error-free, whose images/s
# (the last column) is 4 x its requests/s (both over the same time, printed to 0.1)
g load --rpcs=histogram --sizes=1 --batch=4 --concurrency=2 --duration-s=1 \
  --markdown=load_batch.md >/dev/null || fail "load --batch=4"
awk -F'|' '/^\| batch 4 x histogram \| 1 MP / {
    n++
    if ($4 + 0 != 2 || $5 + 0 < 1 || $6 + 0 != 0 || !($13 + 0 > 0)) bad = 1
    d = $13 - 4 * $7; if (d < -0.25 || d > 0.25) bad = 1
  } END { exit n != 1 || bad }' load_batch.md ||
  fail "load_batch.md has no error-free batch row with images/s = 4 x requests/s: $(cat load_batch.md)"
grep -q "^| histogram | " load_batch.md && fail "load --batch also ran single calls: $(cat load_batch.md)"
for bad in -1 1001 x; do
  g load --rpcs=histogram --sizes=1 --duration-s=1 --batch=$bad >/dev/null 2>err.txt
  [ $? = 2 ] || fail "load --batch=$bad should exit 2"
  grep -q -- "--batch must be an integer in \[0, 1000\], got \"$bad\"" err.txt ||
    fail "bad --batch=$bad: $(cat err.txt)"
done
g load --rpcs=histogram,analyze_4 --sizes=1 --duration-s=1 --batch=2 >/dev/null 2>err.txt
[ $? = 2 ] || fail "load --batch with analyze_4 should exit 2"
grep -q "analyze_4.*--batch=2" err.txt || fail "--batch with analyze_4: $(cat err.txt)"

# delete, then the id is gone (exit 1, NOT_FOUND)
g delete "$id" "$kept" >/dev/null || fail "delete"
g histogram "$id" >/dev/null 2>err.txt
[ $? = 1 ] || fail "histogram of a deleted id should exit 1"
grep -q NOT_FOUND err.txt || fail "no NOT_FOUND message: $(cat err.txt)"

# Errors and exit codes: bad option (2), bad value from the server (1), missing file (4),
# unreachable server (3).
g histogram "$sample" --no-such-option >/dev/null 2>&1
[ $? = 2 ] || fail "unknown option should exit 2"
g histogram "$sample" --bins=70000 >/dev/null 2>err.txt
[ $? = 1 ] || fail "bins=70000 should exit 1"
grep -q "INVALID_ARGUMENT.*bins" err.txt || fail "bins message: $(cat err.txt)"
g histogram /no/such/file.png >/dev/null 2>&1
[ $? = 4 ] || fail "missing file should exit 4"
"$client_bin" --server=127.0.0.1:1 --timeout-s=5 info >/dev/null 2>&1
[ $? = 3 ] || fail "unreachable server should exit 3"
"$client_bin" --server=127.0.0.1:1 --timeout-s=5 health >/dev/null 2>&1
[ $? = 1 ] || fail "health of an unreachable server should exit 1"
# Global options also as two words; one given last without its value is a usage error (2).
[ "$("$client_bin" --server "127.0.0.1:$port" --timeout-s 30 health)" = SERVING ] \
  || fail "--server HOST:PORT (two words) did not reach the server"
"$client_bin" --server >/dev/null 2>err.txt
[ $? = 2 ] || fail "--server without a value should exit 2"
grep -q -- "--server needs a value" err.txt || fail "--server message: $(cat err.txt)"
[ "$(g health)" = SERVING ] || fail "server no longer serving after bad input"

# Prometheus metrics, fetched over HTTP: the two refused histogram calls above are counted.
metrics_port=$(sed -n 's/.*metrics on .*(port \([0-9]*\)).*/\1/p' "$server_log")
[ -n "$metrics_port" ] || fail "server did not report its metrics port"
curl -sS --fail --max-time 10 "http://127.0.0.1:$metrics_port/metrics" >metrics.txt \
  || fail "GET /metrics"
for code in NOT_FOUND INVALID_ARGUMENT; do
  grep -qx "glimpse_calls_total{code=\"$code\",method=\"Histogram\"} 1" metrics.txt \
    || fail "/metrics does not count one Histogram $code: $(grep calls_total metrics.txt)"
done
grep -q '^glimpse_device_info{.*} 1$' metrics.txt || fail "/metrics has no glimpse_device_info"

# SIGTERM: the server stops and exits 0.
kill -TERM "$server_pid"
wait "$server_pid"
rc=$?
server_pid=""
[ $rc = 0 ] || fail "server exited $rc after SIGTERM"
grep -q "stopped" "$server_log" || fail "no 'stopped' line in the log"
# TLS: a self-signed certificate for localhost; the client trusts it with --tls-ca.
if command -v openssl >/dev/null; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost -keyout key.pem -out cert.pem >/dev/null 2>&1 \
    || fail "openssl could not make a certificate"
  start_server tls-server --listen=127.0.0.1:0 --warm-up=0 --tls-cert=cert.pem --tls-key=key.pem ||
    fail "TLS server did not start"
  grep -q "with TLS" "$server_log" || fail "server does not say it serves TLS"
  [ "$("$client_bin" --server="localhost:$port" --tls-ca=cert.pem --timeout-s=30 health)" = SERVING ] \
    || fail "health over TLS"
  "$client_bin" --server="localhost:$port" --timeout-s=5 health >/dev/null 2>&1 \
    && fail "a plaintext client should not get an answer from the TLS server"
  kill -TERM "$server_pid"
  wait "$server_pid" || fail "TLS server exit status"
  server_pid=""
fi
"$server_bin" --tls-cert=only-a-cert.pem >/dev/null 2>&1
[ $? = 1 ] || fail "--tls-cert without --tls-key should fail start-up"
"$server_bin" --max-queue=0 >/dev/null 2>&1
[ $? = 2 ] || fail "--max-queue=0 should be refused"
# (The help is read whole first: grep -q would stop reading at its match, and a server still
# writing would die of SIGPIPE, failing the pipeline.)
server_help=$("$server_bin" --help) || fail "--help exit status"
for flag in --max-connection-age-s --pin-driver-threads --warm-up-threads; do
  grep -q -- "$flag" <<<"$server_help" || fail "--help does not list $flag"
done

# Access control: --token and $GLIMPSE_TOKEN on every command, glimpse load included.
alice_token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
bob_token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '# tenants\nalice %s\nbob %s\n' "$alice_token" "$bob_token" >tokens
start_server tokens-server --listen=127.0.0.1:0 --shutdown-grace-s=10 --warm-up=0 --tokens=tokens ||
  fail "server with --tokens did not start"
grep -q "access control on: 2 bearer token" "$server_log" || fail "start-up log: access control"
[ "$(g health)" = SERVING ] || fail "health needs no token"
g list >/dev/null 2>err.txt
[ $? = 1 ] || fail "list without a token should exit 1"
grep -q "UNAUTHENTICATED" err.txt || fail "no UNAUTHENTICATED in: $(cat err.txt)"
id=$(g --token="$alice_token" upload "$sample") || fail "upload with --token"
GLIMPSE_TOKEN=$alice_token g list | grep -q "$id" || fail "list with \$GLIMPSE_TOKEN"
GLIMPSE_TOKEN=$bob_token g histogram "$id" >/dev/null 2>err.txt
[ $? = 1 ] && grep -q NOT_FOUND err.txt || fail "bob's histogram of alice's image: $(cat err.txt)"
GLIMPSE_TOKEN=$bob_token g list | grep -q "$id" && fail "bob lists alice's image"
GLIMPSE_TOKEN=$alice_token g load --rpcs=histogram --sizes=1 --concurrency=2 --duration-s=1 \
  >load.txt 2>&1 || fail "load with \$GLIMPSE_TOKEN: $(cat load.txt)"
g --token="$bob_token" load --rpcs=histogram --sizes=1 --concurrency=1 --duration-s=1 \
  >/dev/null 2>&1 || fail "load with --token"
g --token="$alice_token" delete "$id" || fail "delete with --token"
grep -q "$alice_token\|$bob_token" "$server_log" && fail "a token appears in the server log"
kill -TERM "$server_pid"
wait "$server_pid" || fail "server with --tokens: exit status"
server_pid=""

echo "PASS: every glimpse subcommand against glimpse-server on port $port"
