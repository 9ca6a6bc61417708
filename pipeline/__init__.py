"""tracereplay: replay public cluster traces through scheduler policies and measure the cost."""

__version__ = "0.1.0"
