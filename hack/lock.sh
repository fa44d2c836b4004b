# Sourced by the scripts that build or install test tools. make test builds
# tools ahead of the tiers that need them (hack/prebuild.sh) while other
# tiers may ask for the same tool: each build holds a lock, so a second
# asker waits and finds the tool built, and apt runs one install at a time.

# lock NAME holds an exclusive lock on NAME until the script exits.
lock() {
  local dir="${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}/locks"
  mkdir -p "$dir"
  local fd
  exec {fd}>"$dir/$1.lock"
  flock "$fd"
}

# apt_install PKG... installs Debian packages, one apt at a time.
apt_install() {
  local dir="${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}/locks"
  mkdir -p "$dir"
  export DEBIAN_FRONTEND=noninteractive
  flock "$dir/apt.lock" sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" >/dev/null' apt_install "$@"
}
