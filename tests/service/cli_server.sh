# Sourced by the CLI end-to-end tests (cli_test.sh, cli_each_test.sh) with their arguments
# SERVER_BINARY CLIENT_BINARY SAMPLE_PNG: sets server_bin, client_bin, sample and a scratch
# folder $work removed on exit (with any server still running), and defines
#   fail MESSAGE                 prints it and the last server's log, exits 1;
#   start_server NAME ARGS...    glimpse-server with ARGS in the background, logging to
#                                $work/NAME.log; waits up to 30 s for the port it reports (sets
#                                server_pid, server_log and port); non-zero if it did not;
#   start_server_or_skip ARGS... start_server, where a machine that cannot open an EGL context
#                                skips the test (exit 0 with a note) unless
#                                GLIMPSE_REQUIRE_GPU_CONTEXT=1, and any other failure fails it;
#   g ARGS...                    the glimpse CLI against the server on $port.
server_bin=$(realpath "$1")
client_bin=$(realpath "$2")
sample=$(realpath "$3")
work=$(mktemp -d)
server_pid=""
server_log=""  # the log of the server start_server started last
cleanup() {
  [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  if [ -n "$server_log" ]; then
    echo "--- server log ($server_log)" >&2
    cat "$server_log" >&2
  fi
  exit 1
}
# The log is made empty here, before the server starts: the shell opens it in the forked child,
# and a loaded machine may run this loop first, on a log a previous server left.
start_server() {
  server_log="$work/$1.log"
  shift
  : >"$server_log"
  "$server_bin" "$@" >"$server_log" 2>&1 &
  server_pid=$!
  port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's/.*listening on .*(port \([0-9]*\)).*/\1/p' "$server_log")
    [ -n "$port" ] && return 0
    if ! kill -0 "$server_pid" 2>/dev/null; then
      server_pid=""
      return 1
    fi
    sleep 0.1
  done
  return 1
}
start_server_or_skip() {
  start_server server "$@" && return 0
  if [ -z "$server_pid" ] && grep -q "opening the GL context" "$server_log" &&
    [ "${GLIMPSE_REQUIRE_GPU_CONTEXT:-0}" != 1 ]; then
    echo "SKIP: no EGL context: $(cat "$server_log")"
    exit 0
  fi
  [ -z "$server_pid" ] && fail "server exited at start-up"
  fail "server did not report its port"
}
g() { "$client_bin" --server="127.0.0.1:$port" --timeout-s=60 "$@"; }
