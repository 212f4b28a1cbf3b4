# Sourced by bin/ scripts: sets JAVA_HOME to a JDK >= 22 or exits with advice.
# Order: $JAVA_HOME if new enough, else the newest JDK under /usr/lib/jvm (and a few usual places).
min_java=22

java_major() { # prints the feature version of the JDK at $1, or nothing
  local v
  v=$("$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p' | head -n1)
  [ -n "$v" ] && echo "${v%%.*}"
}

find_jdk() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/javac" ]; then
    local m; m=$(java_major "$JAVA_HOME")
    if [ -n "$m" ] && [ "$m" -ge "$min_java" ]; then echo "$JAVA_HOME"; return 0; fi
  fi
  local best="" best_v=0 d m
  for d in /usr/lib/jvm/* /opt/java/* /opt/jdk* "$HOME"/.sdkman/candidates/java/*; do
    [ -x "$d/bin/javac" ] || continue
    m=$(java_major "$d") || continue
    if [ -n "$m" ] && [ "$m" -ge "$min_java" ] && [ "$m" -gt "$best_v" ]; then best="$d"; best_v=$m; fi
  done
  [ -n "$best" ] && echo "$best"
}

JDK=$(find_jdk || true)
if [ -z "$JDK" ]; then
  echo "mooncake4j needs a JDK >= $min_java (Java 25 recommended) and found none:" >&2
  echo "  JAVA_HOME=${JAVA_HOME:-<unset>}; nothing suitable under /usr/lib/jvm." >&2
  echo "  Install one, e.g. 'apt-get install temurin-25-jdk' or 'apt-get install openjdk-25-jdk', or set JAVA_HOME." >&2
  exit 2
fi
export JAVA_HOME="$JDK"
