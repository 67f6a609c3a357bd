# scripts/java-service.sh — what scripts/kafka.sh and scripts/s3proxy.sh
# share: sourced (not run) after they set `pom`, `dir` and die().
#
#   maven_classpath NAME VERSION [LABEL]  the class path of $pom's dependencies,
#                                  resolved by Maven once and cached per
#                                  NAME-VERSION (the jars stay in ~/.m2)
#   java_bin                       the java to run
#   free_port                      a free loopback port
#   running_pid                    the pid in $dir/pid if it is alive

maven_classpath() { # name version label
    local name=$1 ver=$2 label=${3:-$1} cache
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/sluice/$name-$ver.classpath
    if [ -s "$cache" ]; then
        local ok=1 jar
        IFS=: read -r -a jars < "$cache"
        for jar in "${jars[@]}"; do [ -f "$jar" ] || { ok=0; break; }; done
        if [ $ok = 1 ]; then cat "$cache"; return; fi
    fi
    command -v mvn >/dev/null || die "mvn not found (scripts/install-deps.sh installs maven)"
    mkdir -p "$(dirname "$cache")"
    local log
    log=$(mktemp)
    if ! mvn -B -q -f "$pom" dependency:build-classpath -Dmdep.outputFile="$cache.tmp" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        die "cannot fetch $label $ver from Maven Central (see above)"
    fi
    rm -f "$log"
    mv "$cache.tmp" "$cache"
    cat "$cache"
}

java_bin() {
    command -v java >/dev/null || die "java not found (scripts/install-deps.sh installs default-jdk-headless)"
    echo java
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

running_pid() {
    [ -f "$dir/pid" ] || return 1
    local pid
    pid=$(cat "$dir/pid")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}
