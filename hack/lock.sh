# Sourced by the scripts that build or install test tools. make test builds
# tools ahead of the tiers that need them (hack/prebuild.sh) while other
# tiers may ask for the same tool: each build holds a lock, so a second
# asker waits and finds the tool built, and apt runs one install at a time.

# lock NAME holds an exclusive lock on NAME until the script exits. The
# background builds run at a lower priority, so that the tiers running
# meanwhile get the CPU first; a tier that comes to wait for one of them
# would then wait on the slowest build on the machine, so the build it waits
# for takes the waiter's priority.
lock() {
  local dir="${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}/locks"
  mkdir -p "$dir"
  local fd
  exec {fd}>"$dir/$1.lock"
  if ! flock -n "$fd"; then
    raise_holder "$dir/$1.pid"
    flock "$fd"
  fi
  echo "$$" >"$dir/$1.pid"
}

# raise_holder PIDFILE gives the process named in PIDFILE, and every process
# under it, this shell's niceness when theirs is lower (renicing up needs
# root; without it the build keeps its priority).
raise_holder() {
  local holder mine
  holder=$(cat "$1" 2>/dev/null) || return 0
  [ -n "$holder" ] && [ -d "/proc/$holder" ] || return 0
  mine=$(ps -o ni= -p $$ | tr -d ' ')
  local level=("$holder") tree=()
  while [ ${#level[@]} -gt 0 ]; do
    tree+=("${level[@]}")
    mapfile -t level < <(pgrep -P "$(IFS=,; echo "${level[*]}")")
  done
  local pid
  for pid in "${tree[@]}"; do
    if [ "$(ps -o ni= -p "$pid" 2>/dev/null | tr -d ' ')" -gt "$mine" ] 2>/dev/null; then
      renice -n "$mine" -p "$pid" >/dev/null 2>&1 || true
    fi
  done
}

# apt_install PKG... installs Debian packages, one apt at a time.
apt_install() {
  local dir="${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}/locks"
  mkdir -p "$dir"
  export DEBIAN_FRONTEND=noninteractive
  flock "$dir/apt.lock" sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" >/dev/null' apt_install "$@"
}
