# Turns `go test -bench BenchmarkGPU` output into a GFLOP/s table: one row
# per shape, one column per backend (scripts/gpu-check.sh).
/^Benchmark.*GFLOP\/s/ {
	name = $1; sub(/-[0-9]+$/, "", name); n = split(name, p, "/")
	row = (p[1] ~ /Batched$/ ? "batched " : "") p[3]; for (i = 4; i <= n; i++) row = row "/" p[i]
	for (i = 2; i <= NF; i++) if ($i == "GFLOP/s") v[row, p[2]] = $(i - 1)
	if (!(p[2] in c)) { c[p[2]] = 1; cols[++nc] = p[2] }
	if (!(row in r)) { r[row] = 1; rows[++nr] = row }
}
END {
	if (nr == 0) { print "  no results"; exit }
	printf "  %-40s", "GFLOP/s"; for (j = 1; j <= nc; j++) printf " %11s", cols[j]; print ""
	for (i = 1; i <= nr; i++) {
		printf "  %-40s", rows[i]
		for (j = 1; j <= nc; j++) printf " %11s", ((rows[i], cols[j]) in v) ? sprintf("%.0f", v[rows[i], cols[j]]) : "-"
		print ""
	}
}
