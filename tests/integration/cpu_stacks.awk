# Summarize the CPU samples of an evlog_dump listing (used by cpu_*.sh).
#   awk -v mode=MODE [-v pid=PID] -f cpu_stacks.awk DUMP
# MODE: leaf    samples per leaf symbol (kernel leaf when in the kernel)
#       user    samples per user leaf symbol ("count name")
#       kernel  samples per kernel leaf symbol (samples with kernel frames)
#       any     samples holding the symbol anywhere in the stack
#       missing sampled addresses without any symbol event ("count missing")
# A frame without a name is written module+offset.
function kv(k,   i) {
	for (i = 2; i <= NF; i++)
		if (index($i, k "=") == 1)
			return substr($i, length(k) + 2)
	return ""
}
$1 == "symbol" {
	n = kv("name")
	if (n == "")
		n = kv("module") "+" kv("offset")
	sym[kv("pid") "," kv("addr")] = n
}
$1 == "cpu_sample" && (pid == "" || kv("pid") == pid) {
	ns++
	spid[ns] = kv("pid"); snk[ns] = kv("n_kernel") + 0; snu[ns] = kv("n_user") + 0
	sstack[ns] = kv("stack")
}
function name(p, a) {
	if ((p "," a) in sym)
		return sym[p "," a]
	miss++
	return ""
}
END {
	for (i = 1; i <= ns; i++) {
		nf = split(sstack[i], f, ",")
		delete seen
		for (j = 1; j <= nf; j++) {
			p = j <= snk[i] ? 0 : spid[i]
			n = name(p, f[j])
			if (mode == "leaf" && j == 1)
				cnt[n]++
			if (mode == "user" && j == snk[i] + 1)
				cnt[n]++
			if (mode == "kernel" && j == 1 && snk[i] > 0)
				cnt[n]++
			if (mode == "any" && !(n in seen)) {
				seen[n] = 1
				cnt[n]++
			}
		}
	}
	if (mode == "missing") {
		print miss + 0, "missing"
		exit
	}
	for (n in cnt)
		print cnt[n], n
}
