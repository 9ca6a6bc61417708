"""Layers: mechanisms written once and stacked on any base policy (a layer is itself a
policy): opportunistic containers (:mod:`.opportunistic`) and speculative copies
(:mod:`.speculation`); :func:`.stack.stack` puts them together."""
