package setup

import (
	"github.com/consensys/gnark/backend/groth16/bn254/mpcsetup"
)

type (
	phase2  = mpcsetup.Phase2
	commons = mpcsetup.SrsCommons
)
