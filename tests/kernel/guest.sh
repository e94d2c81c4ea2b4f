#!/bin/bash
# The kernel tier's guest side (docs/kernel-tier.md): PID 1 of guest K
# (the kernel's rdma_cm, Debian's librdmacm) or guest U (uscm over Debian's
# libibverbs / libibumad; the kernel's CM kept out until the last checks),
# after tests/kernel/init made the host's / its root. Both guests read
# tests/kernel/checks.list and run it in step: for each check the server's
# guest starts the server and says when it listens, the client's guest runs
# the client and writes the verdict. They meet through files in /ktout/sync
# (the run directory on the host, a 9p share both guests mount: no traffic
# of the harness on the link under test). Everything a check leaves is in
# /ktout/checks/NAME/; the host reads it after both guests powered off.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LC_ALL=C
role=${kt_role:?kt_role= missing from the kernel command line}
OUT=/ktout
SYNC=$OUT/sync
. "$OUT/env" # KT_SRC KT_BUILD KT_LIST (written by tests/kernel/run.sh: the
             # checks.list lines this run runs, in /ktout)
if [ -n "${KT_PROBE:-}" ]; then
	# run.sh's accelerator probe: the kernel got this far, that is all
	mkdir -p "$OUT/$role" && echo probed >"$OUT/$role/status" && sync
	echo o >/proc/sysrq-trigger
	sleep 10
	echo b >/proc/sysrq-trigger
fi

K_ADDR=198.18.0.1
U_ADDR=198.18.0.2
BB=/bin/busybox

log() { echo "kt[$role $SECONDS s] $*"; }

finish() {
	log "powering off ($1)"
	echo "$1" >"$OUT/$role/status"
	sync
	# poweroff; -no-reboot turns the reboot fallback into qemu's exit too
	echo o >/proc/sysrq-trigger
	sleep 10
	echo b >/proc/sysrq-trigger
	sleep 100
}

# post NAME [TEXT]: tell the other guest (rename: it never reads half a file)
post() {
	echo "${2:-}" >"$SYNC/$1.$role.tmp" && mv "$SYNC/$1.$role.tmp" "$SYNC/$1"
}

# await NAME SECONDS: 0 once the other guest posted NAME; 1 on timeout, 2
# when the host says the other guest is gone (then nothing will come)
await() {
	local end=$((SECONDS + $2))
	while [ ! -e "$SYNC/$1" ]; do
		[ -e "$SYNC/gone" ] && return 2
		[ $SECONDS -ge $end ] && return 1
		sleep 0.1
	done
	return 0
}

# ---- the guest itself ---------------------------------------------------
# devtmpfs has no /dev/fd: bash's <(...) and >(...) need it
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
# a fresh /tmp and /run (not the host's files seen through the overlay),
# except where this tree is: a clone in /tmp would vanish under the tmpfs
for d in /tmp /run; do
	case "$KT_SRC/ $KT_BUILD/" in "$d/"* | *" $d/"*) continue ;; esac
	mount -t tmpfs -o mode=$([ $d = /tmp ] && echo 1777 || echo 0755) "${d#/}" "$d"
done
mkdir -p /run/uscm "$OUT/$role"
hostname "kt-$role"
exec </dev/null >>"$OUT/$role/guest.log" 2>&1
# the console shows the same lines (the host prints its tail on failure)
exec > >(tee -a /dev/ttyS0) 2>&1
log "up on $(uname -r), $(nproc) cpu, $(awk '/MemTotal/ { print $2 " kB" }' /proc/meminfo)"

case $role in
K) self=$K_ADDR peer=$U_ADDR ;;
U) self=$U_ADDR peer=$K_ADDR ;;
*) finish "bad role $role" ;;
esac

if [ "$role" = U ]; then
	# The kernel's CM stays out of guest U (docs/operators.md, "Hosts where
	# the kernel's ib_cm is loaded"): a dependent load fails too. Written
	# into the overlay, never the host.
	cat >/etc/modprobe.d/uscm-kernel-tier.conf <<-EOF
		install ib_cm /bin/false
		install rdma_cm /bin/false
		install rdma_ucm /bin/false
		install ib_ucm /bin/false
	EOF
fi

setup() {
	modprobe virtio_net || return 1
	# the only NIC: -nic none on the host's side, one virtio-net link
	local dev
	dev=$(ls /sys/class/net | grep -v '^lo$' | head -1)
	[ -n "$dev" ] || { log "no network interface"; return 1; }
	ip link set lo up && ip link set "$dev" up &&
		ip addr add "$self/24" dev "$dev" || return 1
	NETDEV=$dev
	local mods="rdma_rxe ib_uverbs ib_umad"
	[ "$role" = K ] && mods="$mods rdma_ucm"
	for m in $mods; do modprobe "$m" || { log "modprobe $m failed"; return 1; }; done
	if [ "$role" = U ] && grep -q '^ib_cm ' /proc/modules; then
		log "ib_cm is loaded in U although modprobe.d keeps it out"
		return 1
	fi
	rdma link add rxe0 type rxe netdev "$dev" || return 1
	# the device has the address's GID (RoCE v2, ::ffff:a.b.c.d) before
	# anything resolves to it
	local i
	for i in $(seq 100); do
		grep -qs "0000:0000:0000:0000:0000:ffff:$(printf '%02x%02x:%02x%02x' ${self//./ })" \
			/sys/class/infiniband/rxe0/ports/1/gids/* && break
		sleep 0.1
	done
	# the peer answers (ARP resolved, link up both ways) before the first check
	for i in $(seq 60); do
		$BB ping -c 1 -W 1 "$peer" >/dev/null 2>&1 && return 0
	done
	log "the peer $peer does not answer"
	return 1
}
setup || { post "setup-failed-$role"; finish "setup failed"; }
log "rxe0 on $NETDEV, $self"
ibv_devinfo -d rxe0 2>&1 | grep -E 'state|link_layer' | sed 's/^/    /'

# guest K records the link (every check) for the verdicts and the docs
if [ "$role" = K ] && command -v tcpdump >/dev/null; then
	tcpdump -i "$NETDEV" -U -s 0 -w "$OUT/K/link.pcap" >"$OUT/K/tcpdump.log" 2>&1 &
	TCPDUMP_PID=$!
	for i in $(seq 100); do grep -q 'listening on' "$OUT/K/tcpdump.log" && break; sleep 0.1; done
fi

post "up-$role"
other=K
[ "$role" = K ] && other=U
await "up-$other" 300 || finish "the other guest never came up"

# ---- guest U's states ----------------------------------------------------
ustate=inproc
USCMD_PID=
uscmd_status() { "$KT_BUILD/bin/uscmd" --status 2>&1; }
start_uscmd() {
	"$KT_BUILD/bin/uscmd" -v --pcap "$OUT/U/uscmd.pcap" >>"$OUT/U/uscmd.log" 2>&1 &
	USCMD_PID=$!
	local i
	for i in $(seq 150); do
		uscmd_status >/dev/null && return 0
		kill -0 $USCMD_PID 2>/dev/null || break
		sleep 0.1
	done
	log "uscmd did not start: $(tail -3 "$OUT/U/uscmd.log")"
	return 1
}
stop_uscmd() {
	[ -n "$USCMD_PID" ] || return 0
	kill -TERM $USCMD_PID
	local i
	for i in $(seq 100); do kill -0 $USCMD_PID 2>/dev/null || break; sleep 0.1; done
	kill -KILL $USCMD_PID 2>/dev/null
	wait $USCMD_PID 2>/dev/null
	USCMD_PID=
}
# U moves to the state a check needs: inproc -> uscmd -> kernel
u_enter() {
	[ "$role" = U ] || return 0
	case "$ustate>${1%-nobody}" in
	inproc\>inproc | uscmd\>uscmd | kernel\>kernel) return 0 ;;
	inproc\>uscmd) start_uscmd || return 1 ;;
	inproc\>kernel | uscmd\>kernel)
		stop_uscmd
		rm -f /etc/modprobe.d/uscm-kernel-tier.conf
		modprobe rdma_ucm || return 1
		grep -q '^ib_cm ' /proc/modules || return 1
		;;
	*) log "checks.list goes back from $ustate to $1"; return 1 ;;
	esac
	log "guest U: $ustate -> ${1%-nobody}"
	ustate=${1%-nobody}
}

# ---- programs --------------------------------------------------------------
# the environment a side runs with: uscm's librdmacm.so.1 over the host's
# real libibverbs / libibumad (build/lib holds only uscm's library)
side_env() {
	case $1 in
	kernel) echo "" ;;
	uscm-inproc) echo "LD_LIBRARY_PATH=$KT_BUILD/lib USCM_MODE=inproc USCM_PCAP=$CK/uscm.pcap" ;;
	uscm-uscmd) echo "LD_LIBRARY_PATH=$KT_BUILD/lib USCM_MODE=daemon" ;;
	*) kx_side_env "$1" ;;
	esac
}
# the port each check listens on (udaddy has none of its own: 7174)
port_of() {
	local n
	n=$(grep -v '^#' "$KT_LIST" | awk -v c="$1" 'NF { i++ } $1 == c { print i }')
	echo $((7200 + n))
}
server_cmd() { # APP PORT
	case $1 in
	rping) echo "rping -s -V -C 100 -a $SADDR -p $2" ;;
	ucmatose) echo "ucmatose -b $SADDR -p $2 -c 10" ;;
	udaddy) echo "udaddy -b $SADDR -c 10" ;;
	*) kx_server_cmd "$@" ;;
	esac
}
client_cmd() {
	case $1 in
	rping) echo "rping -c -V -C 100 -a $SADDR -p $2" ;;
	ucmatose) echo "ucmatose -s $SADDR -p $2 -c 10" ;;
	udaddy) echo "udaddy -s $SADDR -c 10" ;;
	*) kx_client_cmd "$@" ;;
	esac
}

# ---- more programs: rping sizes, cmtime, rdma_server, rsockets, perftest,
# a peer killed, one node, an unprivileged user ----------------------------
# A check's program column names what both sides run:
#   rping-s64k             rping -V -C 20 -S 65535, its largest size (the
#                          rping lines run its default, 64 bytes)
#   cmtime                 cmtime -c 200 (its server serves until stopped)
#   rdma_server            rdma_server / rdma_client (one request, one reply)
#   rstream, riostream     rsockets: 100 verified transfers of 64 KiB
#   ib_send_lat, ib_write_bw  perftest over rdma_cm (-R)
#   rping-killserver       the server's guest SIGKILLs the server after 3
#                          pings: the client must see the connection fail
#                          and exit
#   rping-killclient       the client's guest SIGKILLs the client after 3
#                          pings: the server must see DISCONNECTED and exit
# and a side uscm-uscmd-nobody is uscm through uscmd as user nobody.
kx_side_env() {
	case $1 in
	uscm-uscmd-nobody) echo "LD_LIBRARY_PATH=$KT_BUILD/lib USCM_MODE=daemon setpriv --reuid=nobody --regid=nogroup --clear-groups" ;;
	esac
}
kx_server_cmd() { # APP PORT
	case $1 in
	rping-s64k) echo "rping -s -V -S 65535 -C 20 -a $SADDR -p $2" ;;
	cmtime) echo "cmtime -b $SADDR -p $2" ;;
	rdma_server) echo "rdma_server -s $SADDR -p $2" ;;
	rstream | riostream) echo "$1 -b $SADDR -p $2 -S 65536 -C 100 -T v" ;;
	ib_send_lat) echo "ib_send_lat -R -d rxe0 -p $2 -n 100 -F" ;;
	ib_write_bw) echo "ib_write_bw -R -d rxe0 -p $2 -n 100 -F" ;;
	rping-killserver) echo "rping -s -v -S 64 -C 100000 -a $SADDR -p $2" ;;
	rping-killclient) echo "rping -s -V -S 64 -C 100000 -a $SADDR -p $2" ;;
	esac
}
kx_client_cmd() { # APP PORT
	case $1 in
	rping-s64k) echo "rping -c -V -S 65535 -C 20 -a $SADDR -p $2" ;;
	cmtime) echo "cmtime -s $SADDR -p $2 -c 200" ;;
	rdma_server) echo "rdma_client -s $SADDR -p $2" ;;
	rstream | riostream) echo "$1 -s $SADDR -p $2 -S 65536 -C 100 -T v" ;;
	ib_send_lat) echo "ib_send_lat -R -d rxe0 -p $2 -n 100 -F $SADDR" ;;
	ib_write_bw) echo "ib_write_bw -R -d rxe0 -p $2 -n 100 -F $SADDR" ;;
	rping-killserver) echo "rping -c -V -S 64 -C 100000 -a $SADDR -p $2" ;;
	rping-killclient) echo "rping -c -v -S 64 -C 100000 -a $SADDR -p $2" ;;
	esac
}
# kx_stays APP: the server serves until it is stopped (0: stop it as soon
# as the client is done; its status is then "stopped")
kx_stays() { [ "$1" = cmtime ]; }
# kx_refused FILE: the client's output is a refusal for want of a listener
# (tried again while a server in uscmd is still on its way to rdma_listen)
kx_refused() { grep -qiE 'refused|reject' "$1"; }
# kx_retry FILE: a refusal tried again whatever the server: Debian's
# ib_send_lat -R server, on the kernel's CM too, now and then refuses the
# first request (REJECTED, reason 8: no listener) although the kernel
# lists its id in LISTEN, and the client then segfaults (seen between two
# kernels as with a uscm client)
kx_retry() { [ "$APP" = ib_send_lat ] && grep -q 'RDMA_CM_EVENT_REJECTED' "$1"; }
# kx_watch SIDE PID: for the kill checks, SIGKILL the program (the child
# of PID, timeout) once it printed its third ping
kx_watch() {
	local side=$1 pid=$2 log
	case "$APP $side" in
	"rping-killserver server") log=$CK/server.log ;;
	"rping-killclient client") log=$CK/client.try ;;
	*) return 0 ;;
	esac
	(
		local i kid
		for i in $(seq 600); do
			[ "$(grep -c 'ping data' "$log" 2>/dev/null)" -ge 3 ] && break
			kill -0 $pid 2>/dev/null || exit 0
			sleep 0.1
		done
		kid=$(cat /proc/$pid/task/$pid/children 2>/dev/null)
		[ -n "$kid" ] && kill -KILL $kid && echo "$SECONDS" >"$CK/$side.killed"
	) &
}
# kx_want SIDE: the exit statuses a side may end with (a regex; 137: timeout
# reports its child's SIGKILL)
kx_want() {
	case "$APP $1" in
	"cmtime server") echo "0|stopped" ;;
	"rping-killserver server" | "rping-killclient client") echo 137 ;;
	# the survivor exits 0 as between two kernels: the killed side's CM
	# (the kernel's, or uscmd for its dead client) sends a DREQ, rping
	# takes DISCONNECTED as the end of the test (-C 100000 would take
	# hours: an exit 0 is the disconnect, a hang is timeout's 124)
	*) echo 0 ;;
	esac
}
# kx_output: what the programs printed, where they print what they verified
kx_output() {
	local c=$CK/client.log s=$CK/server.log
	case $APP in
	cmtime)
		grep -qE '^connect +:( +[0-9.]+){4}$' "$c" || echo -n "no connect line in cmtime's table; "
		grep -qiE 'fail|error' "$c" && echo -n "cmtime reported a failure; " ;;
	rdma_server)
		grep -qx 'rdma_client: end 0' "$c" || echo -n "no 'rdma_client: end 0'; "
		grep -qx 'rdma_server: end 0' "$s" || echo -n "no 'rdma_server: end 0'; " ;;
	rstream | riostream)
		# the table's line: name (custom: -S), bytes, xfers, iterations,
		# total, time, Gb/sec, usec/xfer
		grep -qE '^custom +64k +100 +1 ' "$c" || echo -n "no 64k x 100 result line; "
		grep -qi 'verification failed' "$c" "$s" && echo -n "data verification failed; " ;;
	ib_send_lat | ib_write_bw)
		grep -qE '^ +(2|65536) +100 ' "$c" || echo -n "no result line for 100 iterations; " ;;
	rping-killserver)
		[ -e "$CK/server.killed" ] || echo -n "the server was not killed; " ;;
	rping-killclient)
		[ -e "$CK/client.killed" ] || echo -n "the client was not killed; " ;;
	esac
}
# kx_figure: cmtime's client's connect step, µs per connection, into
# $CK/figure (the benchmark in docs/performance.md reads it from there)
kx_figure() {
	[ "$APP" = cmtime ] || return 0
	awk '/^connect +:/ { print "connect " $NF " us/conn" }' "$CK/client.log" >"$CK/figure"
}
# both sides of a check in guest U (rxe's loopback): its state first, the
# two run_* then go their own ways
kx_enter_both() { u_enter "${SERVER#uscm-}"; }

# wait_listening SIDE APP PORT PID: 0 once the server can take a request
wait_listening() {
	local side=$1 app=$2 port=$3 pid=$4 i
	[ "$app" = udaddy ] && port=7174
	for i in $(seq 300); do
		kill -0 "$pid" 2>/dev/null || return 1
		case $side in
		# the kernel's own listing of its rdma_cm ids
		kernel) rdma res show cm_id 2>/dev/null | grep 'state LISTEN' | grep -qE ":$port( |\$)" && return 0 ;;
		# the library creates USCM_PCAP when rdma_listen opens the port
		# (docs/testing.md, "Waiting, not sleeping")
		uscm-inproc) [ -e "$CK/uscm.pcap" ] && return 0 ;;
		# an id in uscmd: listening or about to be (the client retries a
		# refusal for want of a listener)
		uscm-uscmd*) uscmd_status | grep -q ', [1-9][0-9]* ids,' && sleep 0.3 && return 0 ;;
		esac
		sleep 0.1
	done
	return 1
}

# ---- one check ----------------------------------------------------------------
# where each side of a check runs
guest_of() { # SIDE OTHERSIDE
	case $1 in
	uscm-*) echo U ;;
	kernel) case $2 in kernel) [ "$3" = client ] && echo U || echo K ;; *) echo K ;; esac ;;
	-) echo - ;;
	esac
}

run_server() {
	local port=$1 cmd pid rc
	cmd=$(server_cmd "$APP" "$port")
	u_enter "${SERVER#uscm-}" || { post "$NAME.ready" "guest U could not enter state ${SERVER#uscm-}"; return; }
	[ "$role" = U ] && uscmd_status >"$CK/uscmd.before" 2>&1
	echo "# $(side_env "$SERVER") $cmd" >"$CK/server.log"
	env $(side_env "$SERVER") timeout 150 $cmd >>"$CK/server.log" 2>&1 &
	pid=$!
	if wait_listening "$SERVER" "$APP" "$port" $pid; then
		post "$NAME.ready" ok
	else
		post "$NAME.ready" "the server is not listening (it exited or 30 s passed)"
	fi
	kx_watch server $pid
	await "$NAME.cdone" 300
	# the server exits by itself once its clients are done (but those
	# kx_stays names, which serve until they are stopped)
	local end=$((SECONDS + 60))
	kx_stays "$APP" && end=$SECONDS
	# a client that failed leaves nothing to wait for
	[ "$(cat "$CK/client.rc" 2>/dev/null)" = 0 ] || [ "$APP" = rping-killclient ] || end=$((SECONDS + 5))
	while kill -0 $pid 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
	local stopped=
	kill -0 $pid 2>/dev/null && stopped=1
	kill -TERM $pid 2>/dev/null
	wait $pid
	rc=$?
	[ -n "$stopped" ] && kx_stays "$APP" && rc=stopped
	echo $rc >"$CK/server.rc"
	[ "$role" = U ] && uscmd_status >"$CK/uscmd.after" 2>&1
	post "$NAME.sdone"
}

run_client() {
	local port=$1 cmd rc=1 try st
	cmd=$(client_cmd "$APP" "$port")
	if [ "$CLIENT" = kernel ] && [ "$role" = U ]; then
		u_enter kernel || { echo "1" >"$CK/client.rc"; echo "guest U could not load the kernel CM" >"$CK/client.log"; }
	elif [ "$role" = U ]; then
		u_enter "${CLIENT#uscm-}" || { echo "guest U could not enter ${CLIENT#uscm-}" >"$CK/client.log"; }
	fi
	await "$NAME.ready" 300
	st=$(cat "$SYNC/$NAME.ready" 2>/dev/null)
	[ "$role" = U ] && uscmd_status >"$CK/uscmd.before" 2>&1
	if [ "$st" = ok ]; then
		for try in 1 2 3 4 5 6 7 8 9 10; do
			echo "# try $try: $(side_env "$CLIENT") $cmd" >>"$CK/client.log"
			local t0=$SECONDS
			env $(side_env "$CLIENT") timeout 90 $cmd >"$CK/client.try" 2>&1 &
			local cpid=$!
			kx_watch client $cpid
			wait $cpid
			rc=$?
			cat "$CK/client.try" >>"$CK/client.log"
			[ $rc -eq 0 ] && break
			# a refusal comes back at once; a request that timed out
			# (UNREACHABLE after the CM's retries) is the verdict
			[ $((SECONDS - t0)) -lt 12 ] || break
			# only a server in uscmd may not be listening yet (an id
			# there is not yet a listen): refused for want of a
			# listener, REJECTED (rping, ucmatose) or UNREACHABLE
			# (udaddy), is tried again; any other failure is the verdict
			kx_retry "$CK/client.try" || {
			case $SERVER in uscm-uscmd*) ;; *) break ;; esac
			grep -qE 'REJECTED|UNREACHABLE' "$CK/client.try" || kx_refused "$CK/client.try" || break
			}
			sleep 0.5
		done
		rm -f "$CK/client.try"
	else
		echo "not run: $st" >>"$CK/client.log"
	fi
	echo $rc >"$CK/client.rc"
	[ "$role" = U ] && uscmd_status >"$CK/uscmd.after" 2>&1
	post "$NAME.cdone"
	await "$NAME.sdone" 300
	verdict
}

# the verdict of a pair, by the client's guest once both sides are done
verdict() {
	local why=
	[[ "$(cat "$CK/client.rc" 2>/dev/null)" =~ ^($(kx_want client))$ ]] ||
		why="${why}client exited $(cat "$CK/client.rc" 2>/dev/null) (want $(kx_want client)); "
	[[ "$(cat "$CK/server.rc" 2>/dev/null)" =~ ^($(kx_want server))$ ]] ||
		why="${why}server exited $(cat "$CK/server.rc" 2>/dev/null || echo '(no status)') (want $(kx_want server)); "
	why="$why$(kx_output)"
	# uscm really was the one on the wire: its capture (in process) or
	# uscmd's counters moved
	case "$CLIENT $SERVER" in
	*uscm-inproc*)
		[ "$(stat -c %s "$CK/uscm.pcap" 2>/dev/null || echo 0)" -gt 24 ] ||
			why="${why}uscm recorded no MAD (USCM_PCAP); " ;;
	*uscm-uscmd*)
		local a b
		b=$(grep -o 'rx_mads=[0-9]*' "$CK/uscmd.before" 2>/dev/null | cut -d= -f2)
		a=$(grep -o 'rx_mads=[0-9]*' "$CK/uscmd.after" 2>/dev/null | cut -d= -f2)
		[ -n "$a" ] && [ -n "$b" ] && [ "$a" -gt "$b" ] ||
			why="${why}uscmd received no MAD (rx_mads ${b:-?} -> ${a:-?}); " ;;
	esac
	if [ -z "$why" ]; then
		echo pass >"$CK/result"
	else
		echo "fail: $why" >"$CK/result"
	fi
	echo $((SECONDS - CK_T0)) >"$CK/seconds"
	kx_figure
	log "$NAME: $(cat "$CK/result")$([ -s "$CK/figure" ] && echo ", $(cat "$CK/figure")")"
}

# ibcm_refused_*: with the kernel's ib_cm loaded in U, uscm refuses with
# its documented line (docs/operators.md) instead of half-working
run_ibcm() {
	u_enter kernel || { echo "fail: could not load the kernel's ib_cm in U" >"$CK/result"; return; }
	# the whole documented line, to its last word: a line cut short by a
	# buffer is a failure too
	local want="uscm: cannot own the CM class (0x07) on rxe0 port 1 (umad_register: Invalid argument): the kernel's ib_cm (loaded with rdma_cm / ib_ucm) or another process already serves it; one process owns a port's CM agent (uscmd shares it between processes: docs/operators.md)" rc why=
	case $CLIENT in
	uscm-inproc)
		echo "# USCM_MODE=inproc rping -s -a $U_ADDR -C 1" >"$CK/client.log"
		env LD_LIBRARY_PATH="$KT_BUILD/lib" USCM_MODE=inproc timeout 60 \
			rping -s -a "$U_ADDR" -p 7199 -C 1 >>"$CK/client.log" 2>&1
		rc=$?
		[ $rc -ne 0 ] && [ $rc -ne 124 ] || why="rping exited $rc; "
		;;
	uscm-uscmd)
		echo "# uscmd --socket /run/uscm/refused.sock" >"$CK/client.log"
		timeout 60 "$KT_BUILD/bin/uscmd" --socket /run/uscm/refused.sock >>"$CK/client.log" 2>&1
		rc=$?
		[ $rc -eq 1 ] || why="uscmd exited $rc (not 1); "
		grep -q "uscmd: no port's CM agent could be opened" "$CK/client.log" ||
			why="${why}no \"no port's CM agent could be opened\"; "
		;;
	esac
	echo $rc >"$CK/client.rc"
	grep -qxF "$want" "$CK/client.log" || why="${why}not the documented line \"$want\"; "
	if [ -z "$why" ]; then echo pass >"$CK/result"; else echo "fail: $why" >"$CK/result"; fi
	echo $((SECONDS - CK_T0)) >"$CK/seconds"
	log "$NAME: $(cat "$CK/result")"
}

# ---- multicast: mckey -------------------------------------------------------
# A check of program mckey (one receiver) or mckey2 (two receiver processes
# in one guest, through one uscmd): the "server" side receives, the
# "client" side sends, to one IPv4 group on RoCE v2 (MGID ::ffff:239.1.2.3,
# Q_Key 0x01234567). Each side binds its own address. The receivers are
# ready once each printed its MULTICAST_JOIN ("joined dgid"; line-buffered
# by stdbuf: mckey's stdout is a file). A uscm receiver must hold the IP
# group on the netdev while joined, as the kernel's rdma_cm does (else the
# guest's IP layer drops the group's datagrams before rxe sees them), and
# no uscm process may leave it behind.
MC_GROUP=239.1.2.3
MC_COUNT=10
# the group as /proc/net/igmp prints it: the address's 32-bit word in the
# guest's (little-endian) byte order
MC_GROUP_HEX=$(printf '%02X%02X%02X%02X' $(echo $MC_GROUP | tr . ' ' | awk '{ print $4, $3, $2, $1 }'))
mc_env() { # SIDE WHO: side_env, plus USCM_STATS (written at exit by uscm's library only)
	local e
	e=$(side_env "$1")
	case $1 in uscm-*) e="$e USCM_STATS=$CK/stats.$2" ;; esac
	echo "$e"
}
mc_nrecv() { [ "$APP" = mckey2 ] && echo 2 || echo 1; }
# mc_igmp NAME: guest U's /proc/net/igmp into CK/igmp.NAME, and whether it
# lists the group on NETDEV ("held" / "not held") into CK/igmp.NAME.on (the
# verdict may be written in the other guest)
mc_igmp() {
	[ "$role" = U ] || return 0
	cat /proc/net/igmp >"$CK/igmp.$1"
	if awk -v dev="$NETDEV" -v grp="$MC_GROUP_HEX" '
		/^[0-9]/ { cur = $2 } $1 == grp && cur == dev { f = 1 } END { exit !f }' "$CK/igmp.$1"; then
		echo held >"$CK/igmp.$1.on"
	else
		echo "not held" >"$CK/igmp.$1.on"
	fi
}

run_mc_receivers() {
	local n i p t pids= rc st=0 joined
	u_enter "${SERVER#uscm-}" || { post "$NAME.ready" "guest U could not enter state ${SERVER#uscm-}"; return; }
	[ "$role" = U ] && uscmd_status >"$CK/uscmd.before" 2>&1
	n=$(mc_nrecv)
	for i in $(seq "$n"); do
		local cmd="mckey -m $MC_GROUP -b $self -C $MC_COUNT"
		echo "# $(mc_env "$SERVER" r$i) $cmd" >"$CK/server$i.log"
		env $(mc_env "$SERVER" r$i) timeout 150 stdbuf -oL $cmd >>"$CK/server$i.log" 2>&1 &
		pids="$pids $!"
	done
	for t in $(seq 300); do
		joined=0
		for i in $(seq "$n"); do grep -q 'joined dgid' "$CK/server$i.log" && joined=$((joined + 1)); done
		[ $joined -eq "$n" ] && break
		sleep 0.1
	done
	mc_igmp joined
	if [ $joined -eq "$n" ]; then
		post "$NAME.ready" ok
	else
		post "$NAME.ready" "$((n - joined)) of $n receivers did not join in 30 s"
	fi
	await "$NAME.cdone" 300
	# each receiver exits by itself once it has MC_COUNT messages
	local end=$((SECONDS + 60))
	for p in $pids; do
		while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
		kill -TERM "$p" 2>/dev/null
		wait "$p"
		rc=$?
		[ $rc -ne 0 ] && st=$rc
	done
	echo $st >"$CK/server.rc"
	cat "$CK"/server[0-9].log >"$CK/server.log"
	[ "$role" = U ] && uscmd_status >"$CK/uscmd.after" 2>&1
	mc_igmp after
	post "$NAME.sdone"
}

run_mc_sender() {
	local cmd="mckey -m $MC_GROUP -b $self -s -C $MC_COUNT" rc=1 st
	if [ "$CLIENT" = kernel ] && [ "$role" = U ]; then
		u_enter kernel || echo "guest U could not load the kernel CM" >"$CK/client.log"
	elif [ "$role" = U ]; then
		u_enter "${CLIENT#uscm-}" || echo "guest U could not enter ${CLIENT#uscm-}" >"$CK/client.log"
	fi
	await "$NAME.ready" 300
	st=$(cat "$SYNC/$NAME.ready" 2>/dev/null)
	if [ "$st" = ok ]; then
		echo "# $(mc_env "$CLIENT" s) $cmd" >>"$CK/client.log"
		env $(mc_env "$CLIENT" s) timeout 90 $cmd >>"$CK/client.log" 2>&1
		rc=$?
	else
		echo "not run: $st" >>"$CK/client.log"
	fi
	echo $rc >"$CK/client.rc"
	mc_igmp after
	post "$NAME.cdone"
	await "$NAME.sdone" 300
	mc_verdict
}

# the verdict, by the sender's guest once both sides are done
mc_verdict() {
	local why= i n
	n=$(mc_nrecv)
	[ "$(cat "$CK/client.rc" 2>/dev/null)" = 0 ] || why="${why}sender exited $(cat "$CK/client.rc" 2>/dev/null); "
	[ "$(cat "$CK/server.rc" 2>/dev/null)" = 0 ] || why="${why}a receiver exited $(cat "$CK/server.rc" 2>/dev/null || echo '(no status)'); "
	for i in $(seq "$n"); do
		grep -q 'data transfers complete' "$CK/server$i.log" 2>/dev/null ||
			why="${why}receiver $i did not get its $MC_COUNT messages; "
	done
	# uscm's library was the one (its USCM_STATS file: written at exit, in
	# daemon mode only with uscmd's answer), the receivers held the IP group
	# while joined, and nothing of uscm's holds it afterwards
	case $CLIENT in uscm-*) [ -s "$CK/stats.s" ] || why="${why}the sender wrote no USCM_STATS; " ;; esac
	case $SERVER in
	uscm-*)
		for i in $(seq "$n"); do
			[ -s "$CK/stats.r$i" ] || why="${why}receiver $i wrote no USCM_STATS; "
		done
		[ "$(cat "$CK/igmp.joined.on" 2>/dev/null)" = held ] ||
			why="${why}$MC_GROUP not on guest U's netdev while the receivers were joined (/proc/net/igmp: igmp.joined); "
		;;
	esac
	[ "$(cat "$CK/igmp.after.on" 2>/dev/null)" = "not held" ] ||
		why="${why}$MC_GROUP still on guest U's netdev after uscm's processes exited, or not read (igmp.after); "
	if [ -z "$why" ]; then echo pass >"$CK/result"; else echo "fail: $why" >"$CK/result"; fi
	echo $((SECONDS - CK_T0)) >"$CK/seconds"
	log "$NAME: $(cat "$CK/result")"
}

# ---- the list ----------------------------------------------------------------
while read -r NAME APP CLIENT SERVER; do
	case $NAME in '' | \#*) continue ;; esac
	CK=$OUT/checks/$NAME CK_T0=$SECONDS
	mkdir -p "$CK"
	# where this check's part of the link's capture begins, on the
	# capture's clock (tests/kernel/fidelity.py): K takes part in every
	# check that puts a MAD on the link and walks the list in step with U
	[ "$role" = K ] && date +%s.%N >"$CK/k.start"
	if [ "$SERVER" = - ]; then
		[ "$role" = U ] && run_ibcm
		continue
	fi
	cg=$(guest_of "$CLIENT" "$SERVER" client)
	sg=$(guest_of "$SERVER" "$CLIENT" server)
	if [ "$sg" = K ]; then SADDR=$K_ADDR; else SADDR=$U_ADDR; fi
	port=$(port_of "$NAME")
	log "$NAME: $APP, client $CLIENT in $cg, server $SERVER in $sg"
	case $APP in
	mckey*)
		if [ "$role" = "$sg" ]; then run_mc_receivers; elif [ "$role" = "$cg" ]; then run_mc_sender; fi
		;;
	*)
	if [ "$role" = "$sg" ] && [ "$role" = "$cg" ]; then
		# both sides in this guest (through uscmd, rxe's loopback)
		kx_enter_both
		run_server "$port" &
		spid=$!
		run_client "$port"
		wait $spid
	elif [ "$role" = "$sg" ]; then
		run_server "$port"
	elif [ "$role" = "$cg" ]; then
		run_client "$port"
	fi
	;;
	esac
	[ -e "$SYNC/gone" ] && finish "the other guest is gone"
done < <(cat "$KT_LIST")

stop_uscmd
if [ -n "${TCPDUMP_PID:-}" ]; then
	# tcpdump lags behind the link under TCG, and on SIGINT it leaves what
	# the kernel still buffers for it (a whole last check was missing
	# from the capture): stop it once the capture stopped growing
	last=-1
	for i in $(seq 40); do
		size=$(stat -c %s "$OUT/K/link.pcap" 2>/dev/null || echo 0)
		[ "$size" = "$last" ] && break
		last=$size
		sleep 0.5
	done
	kill -INT $TCPDUMP_PID 2>/dev/null
	# (not a bare wait: that would wait for the console's tee too)
	wait $TCPDUMP_PID
fi
post "done-$role"
[ "$role" = K ] && await done-U 300
finish done
