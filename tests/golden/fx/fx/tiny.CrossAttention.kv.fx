def forward(self, memory):
    k_proj = self.k_proj(memory)
    k = torch.unflatten(k_proj, -1, (4, 16));  k_proj = None
    k_1 = torch.transpose(k, 1, 2);  k = None
    v_proj = self.v_proj(memory);  memory = None
    v = torch.unflatten(v_proj, -1, (4, 16));  v_proj = None
    v_1 = torch.transpose(v, 1, 2);  v = None
    return (k_1, v_1)
    