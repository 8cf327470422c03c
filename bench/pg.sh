# shellcheck shell=bash
# bench/pg.sh - a throwaway PostgreSQL cluster for the benchmarks that need
# one (bench/db, bench/session-cost), sourced by them: initdb into a
# folder of the caller's, the socket beside it, started and stopped by
# pg_ctl.  It never touches the cluster Debian's package made.
#
# postgres refuses to run as root: as root, the cluster belongs to the
# postgres user the package created (or nobody).

# The newest server binaries Debian installed.
pg_bindir() {
    find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -1
}
pg_user() {
    if [ "$(id -u)" -ne 0 ]; then id -un; elif id postgres >/dev/null 2>&1; then echo postgres; else echo nobody; fi
}
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u "$(pg_user)" -- "$@"; else "$@"; fi; }

# pg_cluster_start DIR PORT SUPERUSER SETTINGS [PREFIX...]: a cluster in
# DIR/data listening on PORT (TCP as SETTINGS say; the unix socket in DIR,
# which workers of any uid may reach), SETTINGS appended to its
# postgresql.conf, the postmaster started under PREFIX (e.g. taskset).
# Returns non-zero after printing the log's end.
pg_cluster_start() {
    _dir=$1 _port=$2 _user=$3 _settings=$4
    shift 4
    _bin=$(pg_bindir)
    if [ -z "$_bin" ] || [ ! -x "$_bin/initdb" ]; then
        echo "PostgreSQL server binaries not found: run scripts/install-deps (package postgresql)" >&2
        return 1
    fi
    mkdir -p "$_dir"
    chmod 755 "$_dir"
    chown "$(pg_user)" "$_dir"
    as_pg "$_bin/initdb" -D "$_dir/data" -U "$_user" --auth=trust -E UTF8 --locale=C.UTF-8 \
        >"$_dir/initdb.out" 2>&1 || { cat "$_dir/initdb.out" >&2; return 1; }
    {
        echo "$_settings"
        echo "port = $_port"
        echo "unix_socket_directories = '$_dir'"
    } >>"$_dir/data/postgresql.conf"
    as_pg "$@" "$_bin/pg_ctl" -D "$_dir/data" -l "$_dir/log" -w start >/dev/null ||
        { tail "$_dir/log" >&2; return 1; }
}

# pg_cluster_stop DIR: stops it if it runs (fast shutdown).
pg_cluster_stop() {
    [ -e "$1/data/postmaster.pid" ] || return 0
    as_pg "$(pg_bindir)/pg_ctl" -D "$1/data" -m fast -w stop >/dev/null 2>&1
}
