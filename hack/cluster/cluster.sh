#!/usr/bin/env bash
# A local Kubernetes control plane from binaries built by hack/cluster/build.sh:
# etcd, kube-apiserver (RBAC, default admission plugins incl. PodSecurity), kube-controller-manager,
# kube-scheduler and kwok, which makes a fake Node Ready and its Pods Running without a kubelet;
# and, when asked, an image registry (hack/oci) that serves HTTPS with a certificate of the
# cluster's CA.
#
#   cluster.sh up      start (or reuse a healthy running) cluster, wait until usable, exit
#   cluster.sh down    stop exactly the processes "up" started (by recorded PID)
#   cluster.sh env     print "export KUBECONFIG=..." (and REGISTRY, REGISTRY_CA with a registry)
#   cluster.sh status  exit 0 when the cluster is running and ready
#
# Environment:
#   CLUSTER_DIR        state: certificates, kubeconfig, data, logs, PIDs (default bin/local-cluster)
#   CLUSTER_BIN        binaries (default bin/cluster)
#   CLUSTER_PORT_BASE  first of the ports used (default 20400): etcd +1/+2, apiserver +43,
#                      controller-manager +57, scheduler +59, kwok +80, registry +90
#                      Keep it below the kernel's ephemeral range (usually 32768-60999), where
#                      outgoing connections take their local ports and could hold one of ours.
#   CLUSTER_AUDIT=1    record an apiserver audit log (Metadata level) in $CLUSTER_DIR/logs/audit.log
#   CLUSTER_REGISTRY=1 also run an image registry on 127.0.0.1 (blobs in $CLUSTER_DIR/images;
#                      tags and manifests in memory: a new start is empty), from $OCI (bin/oci)
#   CLUSTER_NO_GC=1    run no garbage collector: what is deleted is deleted by its owner's
#                      controller, not through owner references (the benchmark's leftover count)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${CLUSTER_DIR:-$root/bin/local-cluster}
bin=${CLUSTER_BIN:-$root/bin/cluster}
base=${CLUSTER_PORT_BASE:-20400}
audit=${CLUSTER_AUDIT:-0}
registry=${CLUSTER_REGISTRY:-0}
oci=${OCI:-$root/bin/oci}
controllers='*,-node-ipam-controller,-node-lifecycle-controller'
[ "${CLUSTER_NO_GC:-0}" = 1 ] && controllers="$controllers,-garbage-collector-controller"

etcd_port=$((base + 1))
etcd_peer_port=$((base + 2))
api_port=$((base + 43))
kcm_port=$((base + 57))
sched_port=$((base + 59))
kwok_port=$((base + 80))
registry_port=$((base + 90))

pki=$dir/pki
logs=$dir/logs
pids=$dir/pids
kubeconfig=$dir/kubeconfig
node=kwok-node-0
# Components are stopped in this order; started in reverse. The registry runs only when asked.
components=(registry kwok kube-scheduler kube-controller-manager kube-apiserver etcd)

log() { echo "cluster: $*" >&2; }

kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

# binary NAME: the program component NAME runs.
binary() {
  if [ "$1" = registry ]; then echo "$oci"; else echo "$bin/$1"; fi
}

# alive NAME: the recorded process of NAME runs, and is ours (guards against PID reuse): its
# command line names its binary, or for the registry, this cluster's registry port.
alive() {
  local pidfile=$pids/$1.pid pid mark="$bin/$1"
  [ "$1" = registry ] && mark="registry --addr=127.0.0.1:$registry_port"
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -d "/proc/$pid" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$mark" || return 1
}

fail() {
  local name=$1; shift
  log "$name failed: $*"
  if [ -f "$logs/$name.log" ]; then
    log "last lines of $logs/$name.log:"
    tail -n 40 "$logs/$name.log" >&2
  fi
  exit 1
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start NAME ARGS...: run $bin/NAME detached in its own session, log and PID under $dir.
start() {
  local name=$1; shift
  setsid "$(binary "$name")" "$@" >>"$logs/$name.log" 2>&1 </dev/null &
  echo $! > "$pids/$name.pid"
}

# wait_until NAME SECONDS CMD...: poll CMD until it succeeds, or report NAME's log.
wait_until() {
  local name=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    alive "$name" || fail "$name" "process exited"
    [ $SECONDS -lt $deadline ] || fail "$name" "not ready after ${timeout}s"
    sleep 0.5
  done
}

ready() {
  for c in "${components[@]}"; do
    [ "$c" != registry ] || [ "$registry" = 1 ] || continue
    alive "$c" || return 1
  done
  [ "$(cat "$dir/audit" 2>/dev/null)" = "$audit" ] || return 1
  [ "$(cat "$dir/registry" 2>/dev/null || echo 0)" = "$registry" ] || return 1
  [ "$(kc get --raw /readyz 2>/dev/null)" = ok ] || return 1
  kc get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -qx True
}

gen_pki() {
  [ -f "$pki/admin.crt" ] && return 0
  command -v openssl >/dev/null || { log "openssl not found (Debian: apt-get install openssl)"; exit 1; }
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
      -subj "/CN=myproxy-local-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
      -subj "/CN=kube-apiserver" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' > apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr \
      -subj "/O=system:masters/CN=local-admin" 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' > admin.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile admin.ext -out admin.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}

# The registry's serving certificate, signed by the cluster's CA (made on first use, so that a
# cluster started before without a registry gets one too).
gen_registry_cert() {
  [ -f "$pki/registry.crt" ] && return 0
  (
    cd "$pki"
    openssl req -newkey rsa:2048 -nodes -keyout registry.key -out registry.csr \
      -subj "/CN=local-registry" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > registry.ext
    openssl x509 -req -in registry.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile registry.ext -out registry.crt 2>/dev/null
  )
}

write_kubeconfig() {
  cat > "$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: local-admin
  user:
    client-certificate-data: $(base64 -w0 "$pki/admin.crt")
    client-key-data: $(base64 -w0 "$pki/admin.key")
contexts:
- name: local
  context: {cluster: local, user: local-admin}
current-context: local
EOF
}

write_audit_policy() {
  cat > "$dir/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
EOF
}

up() {
  if ready; then
    log "already running: $(env_line)"
    return 0
  fi
  down quiet
  "$here/build.sh"
  mkdir -p "$logs" "$pids" "$dir/etcd"
  local ports=($etcd_port $etcd_peer_port $api_port $kcm_port $sched_port $kwok_port)
  [ "$registry" = 1 ] && ports+=($registry_port)
  for p in "${ports[@]}"; do
    port_free "$p" || { log "port $p is in use; set CLUSTER_PORT_BASE to another range"; exit 1; }
  done
  gen_pki
  write_kubeconfig
  echo "$audit" > "$dir/audit"
  echo "$registry" > "$dir/registry"
  if [ "$registry" = 1 ]; then
    [ -x "$oci" ] || { log "$oci is missing: make oci builds it"; exit 1; }
    gen_registry_cert
    start registry registry --addr="127.0.0.1:$registry_port" --dir="$dir/images" \
      --tls-cert="$pki/registry.crt" --tls-key="$pki/registry.key"
    wait_until registry 30 curl -fsS --cacert "$pki/ca.crt" "https://127.0.0.1:$registry_port/v2/"
  fi

  start etcd --name local --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "local=http://127.0.0.1:$etcd_peer_port" \
    --unsafe-no-fsync --quota-backend-bytes=8589934592
  wait_until etcd 60 curl -fsS "http://127.0.0.1:$etcd_port/health"

  local audit_flags=()
  if [ "$audit" = 1 ]; then
    write_audit_policy
    audit_flags=(--audit-policy-file="$dir/audit-policy.yaml" --audit-log-path="$logs/audit.log"
      --audit-log-maxsize=2000 --audit-log-maxbackup=1)
  fi
  # --enable-aggregator-routing: the apiserver calls a webhook behind a Service (a conversion
  # webhook) at one of its endpoints, as it does an aggregated API: no kube-proxy here routes a
  # Service's cluster IP.
  start kube-apiserver --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 --secure-port="$api_port" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" --cert-dir="$pki" \
    --authorization-mode=Node,RBAC \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-cluster-ip-range=10.96.0.0/16 \
    --enable-aggregator-routing=true \
    "${audit_flags[@]}"
  wait_until kube-apiserver 120 sh -c "[ \"\$(kubectl --kubeconfig '$kubeconfig' get --raw /readyz 2>/dev/null)\" = ok ]"

  # Client-side limits are raised from the defaults (20 and 50 requests per second): with
  # them, the ReplicaSets and Pods of a thousand new Deployments took many minutes to appear.
  start kube-controller-manager --kubeconfig="$kubeconfig" \
    --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$kcm_port" --leader-elect=false \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --use-service-account-credentials=true \
    --kube-api-qps=500 --kube-api-burst=1000 \
    --controllers="$controllers"
  start kube-scheduler --kubeconfig="$kubeconfig" \
    --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$sched_port" --leader-elect=false \
    --kube-api-qps=500 --kube-api-burst=1000
  start kwok --kubeconfig="$kubeconfig" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --cidr=10.0.0.1/16 --node-ip=10.0.0.1 --server-address="127.0.0.1:$kwok_port" \
    --config="$root/hack/cluster/kwok-stages.yaml"

  create_node
  wait_until kwok 60 sh -c "kubectl --kubeconfig '$kubeconfig' get node $node -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  # The node-lifecycle controller that would lift this taint is off (it needs real kubelets).
  kc taint node "$node" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
  # Namespaces need their default ServiceAccount before Pods can be created in them.
  wait_until kube-controller-manager 60 kc get serviceaccount default -n default
  log "ready: $(env_line)"
}

# env_line: what points kubectl, and image pushes, at this cluster.
env_line() {
  if [ "$(cat "$dir/registry" 2>/dev/null)" = 1 ]; then
    echo "export KUBECONFIG=$kubeconfig REGISTRY=127.0.0.1:$registry_port REGISTRY_CA=$pki/ca.crt"
  else
    echo "export KUBECONFIG=$kubeconfig"
  fi
}

# The one fake node holds every Pod of the largest fleet `make bench` runs (N=10000, its lookup
# releases and latency samples): a Pod it has no room for stays Pending and its MyProxy never
# becomes available.
create_node() {
  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $node
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: $node
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
status:
  allocatable: {cpu: "10000", memory: 40Ti, pods: "100000"}
  capacity: {cpu: "10000", memory: 40Ti, pods: "100000"}
EOF
}

down() {
  local quiet=${1:-} c pid
  for c in "${components[@]}"; do
    if alive "$c"; then
      pid=$(cat "$pids/$c.pid")
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 40); do alive "$c" || break; sleep 0.25; done
      alive "$c" && kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 1 20); do alive "$c" || break; sleep 0.25; done
      [ -n "$quiet" ] || log "stopped $c ($pid)"
    fi
    rm -f "$pids/$c.pid"
  done
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) env_line ;;
  status) ready ;;
  *) echo "usage: $0 up|down|env|status" >&2; exit 2 ;;
esac
