module github.com/infernet/infernet

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.0-1
	github.com/ebitengine/purego v0.11.0
	github.com/spf13/cobra v1.10.1
	github.com/tetratelabs/wazero v1.11.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)
