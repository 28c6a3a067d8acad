// Package peers is a node's peer layer: the book of what it knows of other
// peers (their newest adverts, how the replicas given to them went, their
// reputation, back-offs and GPU challenges), persisted in the store; the
// framed streams it speaks to them over; and the change signal that wakes
// those who show its state.
package peers
