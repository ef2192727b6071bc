"""Reading a pasted TensorFlow log or traceback and naming the causes it shows.

The steps, in order: :mod:`.read` reads the file or stream (encoding, size and time limits);
:mod:`.shape` undoes quoting and hard wrapping; :mod:`.match` matches the lines against the
known messages in :mod:`.patterns`; :mod:`.facts` reads what the log printed (versions, device
listings, values); :mod:`.infer` draws the causes those facts imply; :mod:`.unrecognised`
finds the error lines no known message claimed, which the report quotes. :mod:`.memory` reads the
figures of an out-of-memory error for the planner's answer.
"""
