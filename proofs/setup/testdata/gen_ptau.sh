#!/bin/sh
# How testdata/pot8_final.ptau was made: a snarkjs 0.7.6 powers-of-tau
# ceremony of power 8 (256 constraints) with two contributions, a beacon and
# the phase-2 preparation, exactly as the public Hermez/PPoT files are made
# (those are the same format with power up to 28). Needs node and npm.
set -e
npm install --no-audit --no-fund snarkjs@0.7.6
S=node_modules/.bin/snarkjs
$S powersoftau new bn128 8 pot8_0000.ptau
$S powersoftau contribute pot8_0000.ptau pot8_0001.ptau --name="first" -e="infernet test entropy one"
$S powersoftau contribute pot8_0001.ptau pot8_0002.ptau --name="second" -e="infernet test entropy two"
$S powersoftau beacon pot8_0002.ptau pot8_beacon.ptau 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f 10 -n="Final Beacon"
$S powersoftau prepare phase2 pot8_beacon.ptau pot8_final.ptau
$S powersoftau verify pot8_final.ptau
