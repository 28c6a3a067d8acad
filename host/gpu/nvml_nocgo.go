//go:build !cgo

package gpu

import "errors"

// go-nvml needs cgo. Without it there is no NVML: Detect reports
// ErrNoDriver, as on a machine without the driver.
type noNVML struct{}

func newNVML() nvmlLib { return noNVML{} }

var errNoCgo = &nvmlError{Call: "nvmlInit", Code: nvmlErrorLibraryNotFound, Name: "ERROR_LIBRARY_NOT_FOUND (built without cgo)"}

func (noNVML) Init() error                             { return errNoCgo }
func (noNVML) Shutdown() error                         { return nil }
func (noNVML) SystemGetDriverVersion() (string, error) { return "", errNoCgo }
func (noNVML) DeviceGetCount() (int, error)            { return 0, errNoCgo }
func (noNVML) DeviceGetHandleByIndex(int) (nvmlDevice, error) {
	return nil, errors.New("gpu: no NVML")
}
