def forward(self, x, caches, padding_mask, start):
    x_1 = torch.mul(x, 8.0);  x = None
    length = x_1.size(1)
    device_1 = x_1.device
    positions = torch.arange(0, length, device = device_1);  length = device_1 = None
    positions_1 = torch.add(positions, start);  positions = start = None
    dtype = x_1.dtype
    pe = attncomp_lower_ops_sinusoidal(positions_1, 64, dtype);  positions_1 = dtype = None
    x_2 = torch.add(x_1, pe);  x_1 = pe = None
    layers = self.layers
    stepped = attncomp_lower_loops_each_layer_step(layers, x_2, caches, padding_mask);  layers = x_2 = caches = padding_mask = None
    x_3 = stepped[0]
    caches_1 = stepped[1];  stepped = None
    return (x_3, caches_1)
    