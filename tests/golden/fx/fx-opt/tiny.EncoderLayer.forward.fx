def forward(self, x, padding_mask):
    self_attn = self.self_attn(x, padding_mask);  padding_mask = None
    x_1 = torch.add(x, self_attn);  x = self_attn = None
    self_attn_norm = self.self_attn_norm(x_1);  x_1 = None
    ffn = self.ffn(self_attn_norm)
    x_2 = torch.add(self_attn_norm, ffn);  self_attn_norm = ffn = None
    ffn_norm = self.ffn_norm(x_2);  x_2 = None
    return ffn_norm
    