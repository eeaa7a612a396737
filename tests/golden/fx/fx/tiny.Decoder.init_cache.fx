def forward(self, memory):
    layers = self.layers
    caches = attncomp_lower_loops_each_layer_cache(layers, memory);  layers = memory = None
    return caches
    