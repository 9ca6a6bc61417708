"""Placement helpers shared by the policy families: the node index (least- or most-allocated
qualified node, in log time), the segment trees and the treap it is built on."""
