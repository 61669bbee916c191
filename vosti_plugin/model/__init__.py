"""Models vosti ships or describes: the bundled tiny Llama and config.json geometries for the GPU."""
