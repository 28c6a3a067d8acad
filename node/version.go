package node

// release is infernet's version; commit is the commit it was built from,
// set at build time by the Makefile (-ldflags -X ...node.commit=...).
const release = "0.3.0"

var commit string

// Version is infernet's version: the release, with the commit it was built
// from when the build says (`make build` does), as in 0.3.0+019a55f. The
// CLI's --version and `infernet info`, the API and the dashboard, and the
// adverts (Software) all say this one.
func Version() string {
	if commit == "" {
		return release
	}
	return release + "+" + commit
}

// Software is the version string in adverts and the API: infernet/Version.
func Software() string { return "infernet/" + Version() }
