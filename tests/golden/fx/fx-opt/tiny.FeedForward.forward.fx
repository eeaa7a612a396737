def forward(self, x):
    fc1 = self.fc1(x);  x = None
    hidden = torch.relu(fc1);  fc1 = None
    fc2 = self.fc2(hidden);  hidden = None
    return fc2
    