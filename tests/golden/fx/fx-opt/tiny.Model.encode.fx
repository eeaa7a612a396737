def forward(self, src):
    embed = self.embed(src)
    padding_mask = attncomp_lower_ops_padding_mask(src, 0);  src = None
    encoder = self.encoder(embed, padding_mask);  embed = padding_mask = None
    return encoder
    