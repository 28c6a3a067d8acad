//go:build tools

// Package lndbuild pins lnd v0.20.0-beta so that `go mod tidy` records every
// module cmd/lnd and cmd/lncli need. Build them from this directory with:
//
//	go build -tags="signrpc walletrpc chainrpc invoicesrpc routerrpc peersrpc integration" \
//	    github.com/lightningnetwork/lnd/cmd/lnd github.com/lightningnetwork/lnd/cmd/lncli
//
// scripts/regtest.sh does this (into the cache directory) on first use.
package lndbuild

import (
	_ "github.com/jessevdk/go-flags"
	_ "github.com/lightningnetwork/lnd"
	_ "github.com/lightningnetwork/lnd/cmd/commands"
	_ "github.com/lightningnetwork/lnd/signal"
)
