def forward(self, like, batch):
    k = like.new_zeros((batch, 4, 0, 16))
    v = like.new_zeros((batch, 4, 0, 16));  like = batch = None
    return (k, v)
    