"""A Flower App that runs FedAvgM on a fedverify problem and records every round for fedverify."""
