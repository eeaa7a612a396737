def forward(self, x, memory, padding_mask):
    x_1 = torch.mul(x, 8.0);  x = None
    tgt_len = x_1.size(1)
    device_1 = x_1.device
    positions = torch.arange(0, tgt_len, device = device_1);  tgt_len = device_1 = None
    dtype = x_1.dtype
    pe = attncomp_lower_ops_sinusoidal(positions, 64, dtype);  positions = dtype = None
    x_2 = torch.add(x_1, pe);  x_1 = pe = None
    layers = self.layers
    x_3 = attncomp_lower_loops_each_layer(layers, x_2, memory, padding_mask);  layers = x_2 = memory = padding_mask = None
    return x_3
    